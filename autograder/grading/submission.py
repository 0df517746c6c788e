"""Reading a submitted notebook: which exercise it is, and the answer code of each step.

A kit notebook's answers are the code cells whose nbgrader ``grade_id`` is a step's name; which
exercise the notebook belongs to is written in its metadata (``backprop_ninja.exercise``) by the
kit, and otherwise recognised from its grade ids. A notebook in the lecture's own format has no
grade ids at all; :mod:`autograder.grading.lecture` reads those, and
:func:`autograder.grading.loading.load_submissions` hands a notebook to the right reader.

Nothing here executes anything. A file that is not a readable notebook is a submission error; a
missing, renamed or duplicated answer cell costs only its own step, with a reason.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exercises import DEFAULT, EXERCISES, Exercise
from .cell_parse import without_magics

MAX_NOTEBOOK_BYTES = 50 * 2**20
"""A notebook larger than this is refused unread (a real one is well under 1 MB)."""

MAX_CELL_CHARS = 100_000
"""A cell longer than this is not read (the lecture's format: see :mod:`.lecture`)."""

MAX_ANSWER_CHARS = 20_000
"""An answer longer than this is not graded: an answered step is a few lines (a few hundred
characters, a few thousand with comments), and the grader reads each answer's source several
times (normalising it, checking it is plain, looking for autograd and for slips), in its own
process; for Exercise 4 every cell goes into one training run."""

METADATA_KEY = "backprop_ninja"
"""The notebook metadata the kit writes: ``{"exercise": "<assignment id>"}``."""


class SubmissionError(Exception):
    """The file cannot be graded at all; the message says why, in words for the student."""


@dataclass
class Submission:
    """The answer code of a notebook, by step name, and what was wrong with its cells."""

    path: Path
    exercise: Exercise
    answers: dict[str, str] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # step name -> why it has no answer
    where: dict[str, str] = field(default_factory=dict)  # step name -> where its answer is
    format: str = "kit"
    error: str | None = None  # what is wrong with the notebook as a whole, if anything


def grade_id(cell: Any) -> str | None:
    """A cell's nbgrader grade_id, if it has one."""
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nb = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nb.get("grade_id") if isinstance(nb, dict) else None
    return gid if isinstance(gid, str) else None


def source(cell: Any) -> str:
    """A cell's source as one string."""
    src = cell.get("source", "") if isinstance(cell, dict) else ""
    return "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else str(src)


def read_notebook(path: Path) -> dict[str, Any]:
    """Load a notebook as a plain dict, or raise SubmissionError saying what is wrong.

    Only a regular file is read, and never through a symbolic link: the grader reads with its
    own rights, so a link a student made (to the solution, to a classmate's notebook, to a file
    only the grader may read) would hand in a file the student could not. Version-4 notebooks
    are read as JSON and checked for the structure grading uses (a list of cells, each a dict);
    full schema validation is skipped, since nothing but the cells' type, source and nbgrader
    metadata is read. Older notebooks go through nbformat's converter.
    """
    try:  # O_NONBLOCK: opening a FIFO must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP and os.path.islink(path):
            raise SubmissionError(
                "the file is a symbolic link, which is never followed: submit the notebook "
                "file itself"
            ) from None
        if os.path.isdir(path):
            raise SubmissionError(
                f"cannot read this folder: {e.strerror or e}; the notebooks in it were not "
                "graded (make it readable by the grader)"
            ) from None
        raise SubmissionError(f"cannot read the file: {e.strerror or e}") from None
    try:
        size = _regular_size(fd)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        try:
            text = f.read(size + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            raise SubmissionError("the file is not text (not a Jupyter notebook)") from None
    return parse_notebook(text)


def _regular_size(fd: int) -> int:
    """The size of the open file ``fd``, if it is a regular file of a notebook's size."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionError("this is not a regular file: submit the notebook file itself")
    if st.st_size == 0:
        raise SubmissionError("the file is empty; submit the notebook saved from Jupyter")
    if st.st_size > MAX_NOTEBOOK_BYTES:
        raise SubmissionError(f"the file is {st.st_size} bytes, too large to be this notebook")
    return st.st_size


def parse_notebook(text: str) -> dict[str, Any]:
    """A notebook from its JSON text (see :func:`read_notebook`)."""
    try:
        nb = json.loads(text)
    except (ValueError, RecursionError):
        raise SubmissionError(
            "the file is not a Jupyter notebook (it is not notebook JSON)"
        ) from None
    if not isinstance(nb, dict):
        raise SubmissionError("the file is not a Jupyter notebook (it has no cells)")
    if nb.get("nbformat") in (1, 2, 3) or "worksheets" in nb:
        cells = _old_cells(nb)
        if cells > MAX_OLD_CELLS:
            raise SubmissionError(
                f"the notebook is in Jupyter's old format (before version 4) and holds {cells} "
                "cells, more than this notebook ever has: open it in Jupyter, save it and resubmit"
            )
        nb = _converted(text)
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise SubmissionError("the file is not a Jupyter notebook (it has no cells)")
    return nb


MAX_OLD_CELLS = 2_000
"""Most cells of a notebook older than version 4 that is converted: nbformat's converter and
its validation cost the grader about half a millisecond of CPU per cell (a notebook of 300,000
tiny cells, under the size limit: half a minute and a gigabyte), and an answered notebook of
the exercise has a few hundred."""


def _old_cells(nb: dict[str, Any]) -> int:
    """The cells of an old notebook: in its worksheets (versions 2 and 3), or at the top."""
    sheets = nb.get("worksheets")
    if isinstance(sheets, list):
        return sum(len(ws["cells"]) for ws in sheets if isinstance(ws, dict) and _listed(ws))
    return len(nb["cells"]) if _listed(nb) else 0


def _listed(d: dict[str, Any]) -> bool:
    return isinstance(d.get("cells"), list)


def _converted(text: str) -> dict[str, Any]:
    import nbformat  # only for notebooks older than version 4

    try:
        return dict(nbformat.reads(text, as_version=4))
    except Exception as e:  # nbformat raises assorted errors on odd JSON; none may stop a batch
        raise SubmissionError(f"the notebook cannot be read: {type(e).__name__}") from None


def exercise_of(nb: dict[str, Any]) -> Exercise | None:
    """The exercise a kit notebook belongs to: its metadata, else the exercise whose step names
    most of its grade ids match; None when no grade id names a step (not a kit notebook)."""
    meta = nb.get("metadata")
    if isinstance(meta, dict):
        ours = meta.get(METADATA_KEY)
        name = ours.get("exercise") if isinstance(ours, dict) else None
        if isinstance(name, str) and name in EXERCISES:
            return EXERCISES[name]
    ids = {g for g in (grade_id(c) for c in nb["cells"]) if g}
    if not ids:
        return None
    best = max(
        EXERCISES.values(),
        key=lambda ex: len(ids & (set(ex.by_name) | set(ex.by_test_id))),
    )
    if not ids & (set(best.by_name) | set(best.by_test_id)):
        return None
    return best


def extract_answers(nb: dict[str, Any], path: Path, exercise: Exercise | None = None) -> Submission:
    """The code of each step's answer cell (a code cell whose grade_id is the step's name)."""
    ex = exercise or exercise_of(nb) or DEFAULT
    found: dict[str, list[tuple[int, str]]] = {}
    for index, cell in enumerate(nb["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        gid = grade_id(cell)
        if gid is not None and gid in ex.by_name:
            found.setdefault(gid, []).append((index, source(cell)))
    sub = Submission(path=path, exercise=ex)
    for step in ex.steps:
        cells = found.get(step.name, [])
        if not cells:
            sub.problems[step.name] = (
                f"no answer cell with grade id '{step.name}' was found: the cell was deleted or "
                "its metadata changed; answer in the notebook's own cell for this step"
            )
        elif len(cells) > 1:
            sub.problems[step.name] = (
                f"{len(cells)} cells carry the grade id '{step.name}' (a copied cell?); keep one "
                "answer cell per step"
            )
        elif len(cells[0][1]) > MAX_ANSWER_CHARS:
            sub.problems[step.name] = (
                f"the answer cell is {len(cells[0][1]):,} characters, too long to be graded (at "
                f"most {MAX_ANSWER_CHARS:,})"
            )
        else:
            sub.answers[step.name] = without_magics(cells[0][1], cell_magics=False)
            sub.where[step.name] = f"cell {cells[0][0]}"
    return sub


def find_notebooks(paths: list[Path]) -> list[Path]:
    """Files as given; folders searched recursively for ``*.ipynb`` (checkpoints skipped; linked
    folders not walked, and a link or other non-file found is kept, so its result can say why
    it was not read). A folder that cannot be read is kept too, so its result says so: the
    notebooks in it would otherwise be missing from the batch without a word."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(_walk(p))
        else:
            out.append(p)
    seen: set[Path] = set()
    unique = []
    for p in out:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique


def _walk(folder: Path) -> list[Path]:
    """The ``*.ipynb`` entries under ``folder`` that are not folders themselves (links to
    folders included: never followed), and every folder that could not be listed."""
    found: list[Path] = []

    def unreadable(e: OSError) -> None:
        found.append(Path(e.filename) if e.filename else folder)

    for top, dirs, files in os.walk(folder, onerror=unreadable):  # links are not followed
        here = Path(top)
        dirs[:] = [d for d in dirs if d != ".ipynb_checkpoints"]
        found += [here / f for f in files if f.endswith(".ipynb")]
        found += [here / d for d in dirs if d.endswith(".ipynb") and (here / d).is_symlink()]
    return found


def is_stub(code: str) -> bool:
    """True for an answer cell left as released: only comments and ``raise
    NotImplementedError(...)`` (with or without a message)."""
    lines = [ln.strip() for ln in code.splitlines()]
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    if len(body) != 1:
        return not body
    line = body[0]
    return line == "raise NotImplementedError" or (
        line.startswith("raise NotImplementedError(") and line.endswith(")")
    )

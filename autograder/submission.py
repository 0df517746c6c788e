"""Reading a submitted notebook: the answer code of each step, found by its nbgrader grade_id.

Nothing here executes anything. A file that is not a readable notebook is a submission error; a
missing, renamed or duplicated answer cell costs only its own step, with a reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from .catalog import STEPS

MAX_NOTEBOOK_BYTES = 50 * 2**20
"""A notebook larger than this is refused unread (a real one is well under 1 MB)."""

MAX_CELL_CHARS = 100_000
"""An answer cell longer than this is not run."""


class SubmissionError(Exception):
    """The file cannot be graded at all; the message says why, in words for the student."""


@dataclass
class Submission:
    """The answer code of a notebook, by step name, and what was wrong with its cells."""

    path: Path
    answers: dict[str, str] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # step name -> why it has no answer


def _grade_id(cell: Any) -> str | None:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nb = meta.get("nbgrader") if isinstance(meta, dict) else None
    gid = nb.get("grade_id") if isinstance(nb, dict) else None
    return gid if isinstance(gid, str) else None


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def read_notebook(path: Path) -> dict[str, Any]:
    """Load a notebook as a plain dict, or raise SubmissionError saying what is wrong."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise SubmissionError(f"cannot read the file: {e.strerror or e}") from None
    if size == 0:
        raise SubmissionError("the file is empty; submit the notebook saved from Jupyter")
    if size > MAX_NOTEBOOK_BYTES:
        raise SubmissionError(f"the file is {size} bytes, too large to be this notebook")
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        raise SubmissionError("the file is not text (not a Jupyter notebook)") from None
    try:
        nb = nbformat.reads(text, as_version=4)
    except (json.JSONDecodeError, ValueError, TypeError, KeyError, AttributeError):
        raise SubmissionError(
            "the file is not a Jupyter notebook (it is not notebook JSON)"
        ) from None
    except Exception as e:  # nbformat raises assorted errors on odd JSON; none must crash a batch
        raise SubmissionError(f"the notebook cannot be read: {type(e).__name__}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise SubmissionError("the file is not a Jupyter notebook (it has no cells)")
    return nb


def extract_answers(nb: dict[str, Any], path: Path) -> Submission:
    """The code of each step's answer cell (code cell whose nbgrader grade_id is the step name)."""
    found: dict[str, list[str]] = {}
    for cell in nb["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        gid = _grade_id(cell)
        if gid is not None:
            found.setdefault(gid, []).append(_source(cell))
    sub = Submission(path=path)
    for step in STEPS:
        cells = found.get(step.name, [])
        if not cells:
            sub.problems[step.name] = (
                f"no answer cell with grade id '{step.name}' was found: the cell was deleted or "
                "its "
                "metadata changed; answer in the notebook's own cell for this step"
            )
        elif len(cells) > 1:
            sub.problems[step.name] = (
                f"{len(cells)} cells carry the grade id '{step.name}' (a copied cell?); keep one "
                "answer cell per step"
            )
        elif len(cells[0]) > MAX_CELL_CHARS:
            sub.problems[step.name] = "the answer cell is too long to be graded"
        else:
            sub.answers[step.name] = cells[0]
    return sub


def load_submission(path: Path) -> Submission:
    """Read ``path`` and extract its answers; raises SubmissionError if it is not a notebook."""
    return extract_answers(read_notebook(path), path)


def find_notebooks(paths: list[Path]) -> list[Path]:
    """Files as given; folders searched recursively for ``*.ipynb``, checkpoints skipped."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(
                q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts and q.is_file()
            )
        else:
            out.append(p)
    seen: set[Path] = set()
    unique = []
    for p in out:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique


def is_stub(code: str) -> bool:
    """True for an answer cell left as released: only comments and ``raise NotImplementedError``."""
    lines = [ln.strip() for ln in code.splitlines()]
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    return body in ([], ["raise NotImplementedError()"], ["raise NotImplementedError"])

"""The hidden tests of the source notebook: grade one step from inside a Jupyter kernel.

Each grade cell of the source notebook starts with::

    from autograder.incell import check_step
    check_step("dcounts", In[-2])
    globals().setdefault("dcounts", None)

before its visible check (the last line lets that check print "not a tensor" when the answer cell
failed in the kernel, rather than raise a ``NameError`` that would zero a step graded right).

``In[-2]`` is the code of the previous executed cell, the student's answer cell. The answer is
graded exactly as ``backprop-ninja grade`` grades it (same engine, same sandboxed worker, never
in the kernel itself), so a course that keeps nbgrader's stock ``Execute`` preprocessor gets the
same scores as one that uses the kit's preprocessor. A failing step raises ``AssertionError``
with the diagnosis, which nbgrader shows as the cell's error and scores 0.

Under ``nbgrader autograde`` (``$NBGRADER_EXECUTION`` is ``autograde``) the answer is read, as
the kit's preprocessor and ``backprop-ninja grade`` read it, from the answer cell with the step's
grade id in the notebook being graded (nbgrader runs the kernel in that notebook's folder), so a
cell the student added between an answer and its check changes nothing. ``In[-2]`` is the answer
when the notebook cannot be found that way (a student running the notebook themselves).

The seed of the hidden cases comes from ``$BACKPROP_NINJA_SEED`` when set, else it is drawn once
per kernel and printed with every verdict.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Grader
    from .submission import Submission

_grader: Grader | None = None


def _get_grader() -> Grader:
    global _grader
    if _grader is None:
        from .engine import Grader

        env = os.environ.get("BACKPROP_NINJA_SEED")
        _grader = Grader(seed=int(env) if env else None, jobs=1)
    return _grader


def check_step(name: str, code: str) -> None:
    """Grade ``code`` as the answer to step ``name``; print the verdict; raise if it fails."""
    from .catalog import step

    with warnings.catch_warnings():
        # A warning goes to stderr, and nbgrader scores any cell with stderr output 0.
        warnings.simplefilter("ignore")
        grader = _get_grader()
        graded = _graded_notebook(name)
        if graded is None:
            result = grader.grade_code(step(name), code)
        elif name in graded.answers:
            result = grader.grade_code(step(name), graded.answers[name])
        else:  # deleted or duplicated answer cell: the reason is the diagnosis
            result = grader.judge(step(name), None, None, graded.problems.get(name))
    verdict = "passed" if result.passed else "failed"
    print(
        f"{name}: {verdict} ({result.score:g}/{result.max_score:g}, hidden cases, "
        f"seed {grader.seed})"
    )
    if not result.passed:
        raise AssertionError(
            " ".join(f"[{d.code}] {d.message}" for d in result.diagnoses)
            or f"{name} is not correct"
        )


def _graded_notebook(name: str) -> Submission | None:
    """Under ``nbgrader autograde``, the answers of the notebook being graded: the one notebook
    in the kernel's working folder that holds the grade cell of step ``name``. None elsewhere."""
    if os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return None
    from .catalog import step
    from .submission import SubmissionError, _grade_id, extract_answers, read_notebook

    test_id = step(name).test_id
    found = []
    for path in sorted(Path.cwd().glob("*.ipynb")):
        try:
            nb = read_notebook(path)
        except SubmissionError:
            continue
        if any(_grade_id(cell) == test_id for cell in nb["cells"]):
            found.append(extract_answers(nb, path))
    return found[0] if len(found) == 1 else None

"""The hidden tests of the source notebook: grade one step from inside a Jupyter kernel.

Each grade cell of the source notebook starts with::

    from autograder.incell import check_step
    check_step("dcounts", In[-2], "backprop_ninja")

before its visible check.

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

from ..reports.text import failure_text, verdict_line

if TYPE_CHECKING:
    from ..engine.grader import Grader
    from ..grading.submission import Submission


def _get_grader() -> Grader:
    from ..engine.grader import shared_grader
    from ..sandbox.limits import Limits

    env = os.environ.get("BACKPROP_NINJA_SEED", "").strip()
    return shared_grader(int(env) if env else None, Limits(), jobs=1)


def check_step(name: str, code: str, exercise: str = "backprop_ninja") -> None:
    """Grade ``code`` as the answer to step ``name`` of ``exercise``; print the verdict; raise
    AssertionError with the diagnoses if it fails."""
    from ..exercises import get

    ex = get(exercise)
    step = ex.step(name)
    with warnings.catch_warnings():
        # A warning goes to stderr, and nbgrader scores any cell with stderr output 0.
        warnings.simplefilter("ignore")
        grader = _get_grader()
        graded = _graded_notebook(ex.id, step.test_id)
        if graded is None:
            result = grader.grade_code(ex, step, code)
        elif name in graded.answers:
            result = grader.grade_code(ex, step, graded.answers[name], graded.answers)
        else:  # deleted or duplicated answer cell: the reason is the diagnosis
            result = grader.judge(ex, step, None, None, graded.problems.get(name))
    print(verdict_line(result, grader.seed))
    if not result.passed:
        raise AssertionError(failure_text(result))


def _graded_notebook(exercise: str, test_id: str) -> Submission | None:
    """Under ``nbgrader autograde``, the answers of the notebook being graded: the one notebook
    in the kernel's working folder that holds the grade cell ``test_id``. None elsewhere."""
    if os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return None
    from ..exercises import get
    from ..grading.submission import SubmissionError, extract_answers, grade_id, read_notebook

    found = []
    for path in sorted(Path.cwd().glob("*.ipynb")):
        try:
            nb = read_notebook(path)
        except SubmissionError:
            continue
        if any(grade_id(cell) == test_id for cell in nb["cells"]):
            found.append(extract_answers(nb, path, get(exercise)))
    return found[0] if len(found) == 1 else None

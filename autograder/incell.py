"""The hidden tests of the source notebook: grade one step from inside a Jupyter kernel.

Each grade cell of the source notebook ends with::

    from autograder.incell import check_step
    check_step("dcounts", In[-2])

``In[-2]`` is the code of the previous executed cell, the student's answer cell. The answer is
graded exactly as ``backprop-ninja grade`` grades it (same engine, same sandboxed worker, never
in the kernel itself), so a course that keeps nbgrader's stock ``Execute`` preprocessor gets the
same scores as one that uses the kit's preprocessor. A failing step raises ``AssertionError``
with the diagnosis, which nbgrader shows as the cell's error and scores 0.

The seed of the hidden cases comes from ``$BACKPROP_NINJA_SEED`` when set, else it is drawn once
per kernel and printed with every verdict.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Grader

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
        result = grader.grade_code(step(name), code)
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

"""The kit's verdicts as text, formatted in one place for every front end.

The CLI's tables, the pytest suite's failure messages, the notebook's hidden tests, nbgrader's
grade cells and Gradescope's test output all say a step's verdict and diagnoses in these words.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from ..grading.results import Diagnosis, StepResult

WRAP = 96
"""Width of the diagnoses in a grade cell's text (notebooks and feedback do not wrap outputs)."""


def diagnosis_text(d: Diagnosis) -> str:
    """``[code] message``."""
    return f"[{d.code}] {d.message}"


def diagnoses_text(diagnoses: Iterable[Diagnosis], sep: str = " ") -> str:
    """Every diagnosis of a step, ``[code] message`` each."""
    return sep.join(diagnosis_text(d) for d in diagnoses)


def failure_text(result: StepResult) -> str:
    """Why a step failed, in one paragraph (the diagnoses, or a plain sentence)."""
    return diagnoses_text(result.diagnoses) or f"{result.step} is not correct"


def verdict_line(result: StepResult, seed: int) -> str:
    """``dcounts: failed (0/1, hidden cases, seed 123)``."""
    verdict = "passed" if result.passed else "failed"
    return (
        f"{result.step}: {verdict} ({result.score:g}/{result.max_score:g}, hidden cases, "
        f"seed {seed})"
    )


def verdict_text(result: StepResult, seed: int, width: int = WRAP) -> str:
    """The verdict line, then one wrapped line per diagnosis (a grade cell's output)."""
    lines = [verdict_line(result, seed)]
    lines += [
        textwrap.fill(diagnosis_text(d), width=width, subsequent_indent="  ")
        for d in result.diagnoses
    ]
    if not result.passed and not result.diagnoses:
        lines.append(f"{result.step} is not correct.")
    return "\n".join(lines) + "\n"

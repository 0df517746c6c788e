"""Gradescope's ``results.json`` for one submission: one test per step, the diagnosis as output.

The format is Gradescope's autograder specification: a top-level ``score``, and ``tests``, each
with ``name``, ``score``, ``max_score``, ``status`` and ``output``; the file is strict JSON.
"""

from __future__ import annotations

from typing import Any

from ..grading.results import SubmissionResult
from ..reports.text import diagnoses_text


def gradescope_json(sub: SubmissionResult, visibility: str = "visible") -> dict[str, Any]:
    """Gradescope's ``results.json`` (see the module docstring)."""
    tests = [
        {
            "name": s.step,
            "score": s.score,
            "max_score": s.max_score,
            "status": "passed" if s.passed else "failed",
            "output": diagnoses_text(s.diagnoses) or ("correct" if s.passed else ""),
            "visibility": visibility,
        }
        for s in sub.steps
    ]
    out: dict[str, Any] = {"score": sub.score, "tests": tests, "visibility": visibility}
    if sub.error:
        out["output"] = sub.error
    return out

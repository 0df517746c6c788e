"""Gradescope's ``results.json`` for one submission: one test per step, the diagnosis as output.

The format is Gradescope's autograder specification: a top-level ``score`` (which Gradescope
takes over the sum of the tests), ``output`` (text for the whole submission), ``visibility`` and
``stdout_visibility``, and ``tests``, each with ``name``, ``number``, ``score``, ``max_score``,
``status`` (``passed`` or ``failed``), ``output`` and ``visibility``. Visibility is one of
``visible``, ``after_due_date``, ``after_published`` and ``hidden``. The file is strict JSON.

A test's output is what the student reads: the step's diagnoses, then what failed (the shape
got against the one expected, the hidden configurations that failed, in words). The
submission's output says the score, the seed that replays the grading, and why a notebook could
not be graded at all (:func:`failure_json`: score 0 and the reason, never a traceback).
"""

from __future__ import annotations

from typing import Any

from ..exercises import EXERCISES
from ..grading.results import StepResult, SubmissionResult
from ..reports.text import diagnoses_text, failure_facts, step_state

VISIBILITY = ("visible", "after_due_date", "after_published", "hidden")
"""Gradescope's visibility settings, from the most open."""


def step_output(sub: SubmissionResult, s: StepResult) -> str:
    """A test's output: ``correct``, or the diagnoses and what failed, one paragraph each."""
    if s.passed:
        return "correct" + (f" ({diagnoses_text(s.diagnoses)})" if s.diagnoses else "")
    ex = EXERCISES.get(sub.exercise)
    parts = [diagnoses_text(s.diagnoses, sep="\n") or f"{s.step} is not correct."]
    if ex is not None and step_state(s) == "wrong":
        facts = failure_facts(ex, s)
        if facts:
            parts.append("What failed:\n" + "\n".join(f"- {f}" for f in facts))
    return "\n\n".join(parts)


def gradescope_json(
    sub: SubmissionResult,
    visibility: str = "visible",
    seed: int | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """Gradescope's ``results.json`` (see the module docstring). ``seed`` is named in the
    output; ``note`` is a paragraph for the whole submission (which exercise it was graded as)."""
    if visibility not in VISIBILITY:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITY)}, not {visibility!r}")
    tests = [
        {
            "name": s.step,
            "number": str(i),
            "score": s.score,
            "max_score": s.max_score,
            "status": "passed" if s.passed else "failed",
            "output": step_output(sub, s),
            "visibility": visibility,
        }
        for i, s in enumerate(sub.steps, start=1)
    ]
    passed = sum(1 for s in sub.steps if s.passed)
    lines = [note] if note else []
    if sub.steps:
        lines.append(
            f"{passed} of {len(sub.steps)} steps passed: {sub.score:g}/{sub.max_score:g} points."
        )
    if sub.error:
        lines.append(sub.error)
    if seed is not None:
        lines.append(f"Hidden configurations drawn with seed {seed}.")
    out: dict[str, Any] = {
        "score": sub.score,
        "output": "\n\n".join(lines),
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    return out


def failure_json(reason: str, visibility: str = "visible") -> dict[str, Any]:
    """``results.json`` for a submission that could not be graded at all: score 0 and the reason
    in the student's words (no notebook, several notebooks, not a notebook, a grader failure)."""
    return {
        "score": 0.0,
        "output": reason,
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": [],
    }

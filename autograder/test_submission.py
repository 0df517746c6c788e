"""The hidden suite: one test per step of the ``--submission`` notebook.

Run it with ``pytest --pyargs autograder --submission PATH``; a failing test shows the diagnosis.
"""

from __future__ import annotations

import pytest

from autograder.catalog import STEPS
from autograder.results import SubmissionResult


def test_notebook_is_readable(submission_result: SubmissionResult) -> None:
    if submission_result.error and not submission_result.steps:
        pytest.fail(submission_result.error, pytrace=False)


@pytest.mark.parametrize("step", [s.name for s in STEPS])
def test_step(step: str, submission_result: SubmissionResult) -> None:
    if not submission_result.steps:
        pytest.fail(f"{step}: not graded: {submission_result.error}", pytrace=False)
    result = submission_result.step(step)
    if not result.passed:
        reasons = "\n".join(f"[{d.code}] {d.message}" for d in result.diagnoses)
        pytest.fail(f"{step}: {reasons or 'wrong'}", pytrace=False)

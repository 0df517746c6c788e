"""The hidden suite: one test per step of the ``--submission`` notebook.

Run it with ``pytest -c /dev/null --pyargs autograder --submission PATH`` (see
:mod:`autograder.pytest_plugin`); a failing test shows the diagnosis.
The steps are those of the notebook's own exercise.
"""

from __future__ import annotations

import pytest

from autograder.grading.results import SubmissionResult
from autograder.reports.text import failure_text


def test_notebook_is_readable(submission_result: SubmissionResult) -> None:
    if submission_result.error and not submission_result.steps:
        pytest.fail(submission_result.error, pytrace=False)


def test_step(step: str, submission_result: SubmissionResult) -> None:
    if not submission_result.steps:
        pytest.fail(f"{step}: not graded: {submission_result.error}", pytrace=False)
    result = submission_result.step(step)
    if not result.passed:
        pytest.fail(f"{step}: {failure_text(result)}", pytrace=False)

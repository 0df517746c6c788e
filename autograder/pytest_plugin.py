"""pytest entry: ``pytest --pyargs autograder --submission PATH`` grades one notebook.

The hidden suite (:mod:`autograder.test_submission`) has one test per step, ``test_step[dC]``
and so on, each failing with the step's diagnosis. The plugin is registered through the
``pytest11`` entry point, so the options exist wherever the kit is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .results import SubmissionResult


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("backprop-ninja")
    group.addoption(
        "--submission",
        type=Path,
        metavar="PATH",
        help="notebook graded by the backprop-ninja hidden suite",
    )
    group.addoption(
        "--bn-seed",
        type=int,
        metavar="N",
        dest="bn_seed",
        help="seed of the hidden configurations (default: drawn and reported)",
    )


_graded: dict[Path, tuple[int, SubmissionResult]] = {}


def graded(config: pytest.Config) -> tuple[int, SubmissionResult]:
    """Grade ``--submission`` once per session; returns (seed, result)."""
    path = config.getoption("submission")
    if path is None:
        raise pytest.UsageError("the backprop-ninja suite needs --submission PATH (a notebook)")
    if path not in _graded:
        from .engine import Grader

        grader = Grader(seed=config.getoption("bn_seed"))
        run = grader.run([path])
        _graded[path] = (grader.seed, run.submissions[0])
    return _graded[path]


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("submission") is None:
        return None
    seed, sub = graded(config)
    return f"backprop-ninja: {sub.path}, seed {seed} (replay with --bn-seed {seed})"


@pytest.fixture(scope="session")
def submission_result(pytestconfig: pytest.Config) -> SubmissionResult:
    """The graded ``--submission``."""
    return graded(pytestconfig)[1]

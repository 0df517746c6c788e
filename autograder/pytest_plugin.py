"""pytest entry: ``pytest --pyargs autograder --submission PATH`` grades one notebook.

The hidden suite (:mod:`autograder.test_submission`) has one test per step of the notebook's
exercise, ``test_step[dC]`` and so on, each failing with the step's diagnosis. The plugin is
registered through the ``pytest11`` entry point, so the options exist wherever the kit is
installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .grading.results import SubmissionResult


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
        from .engine.grader import Grader

        grader = Grader(seed=config.getoption("bn_seed"))
        try:
            run = grader.run([path])
        finally:
            grader.close()
        _graded[path] = (grader.seed, run.submissions[0])
    return _graded[path]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``test_step`` of the hidden suite: one test per step of the submission's exercise."""
    if "step" not in metafunc.fixturenames or metafunc.module.__name__ != (
        "autograder.test_submission"
    ):
        return
    from .exercises import DEFAULT, EXERCISES

    ex = DEFAULT
    if metafunc.config.getoption("submission") is not None:
        ex = EXERCISES.get(graded(metafunc.config)[1].exercise, DEFAULT)
    metafunc.parametrize("step", [s.name for s in ex.steps])


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("submission") is None:
        return None
    seed, sub = graded(config)
    return (
        f"backprop-ninja: {sub.path} ({sub.exercise}), seed {seed} (replay with --bn-seed {seed})"
    )


@pytest.fixture(scope="session")
def submission_result(pytestconfig: pytest.Config) -> SubmissionResult:
    """The graded ``--submission``."""
    return graded(pytestconfig)[1]

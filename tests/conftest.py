"""Shared fixtures of the kit's tests.

One :class:`~autograder.engine.grader.Grader` serves the whole session (``grader``): building
one starts its sandboxes and the hidden cases, and a test that grades answers only needs one
that is already running. Tests that must see a fresh grader (a seed of their own, limits of
their own) build one and close it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autograder.engine.grader import Grader
from autograder.grading.results import StepResult
from autograder.sandbox.limits import Limits

REPO_ROOT = Path(__file__).resolve().parent.parent

SEED = 20240229
"""The seed of the session's grader (the kit's verdicts hold for any seed)."""

LIMITS = Limits(step_seconds=5.0, budget_seconds=60.0)
"""The session grader's limits: short steps, so hostile answers do not hold the suite up."""


def names_candidates() -> list[Path]:
    """Where the tests look for names.txt, in order."""
    from autograder.dataset.names import ENV_VAR

    env = os.environ.get(ENV_VAR, "").strip()
    candidates = [Path(env)] if env else []
    shared = REPO_ROOT.parent / "shared" / "data" / "names.txt"
    return [*candidates, shared, REPO_ROOT / "data" / "names.txt"]


@pytest.fixture(scope="session")
def names_txt() -> Path:
    """A verified copy of names.txt, never downloaded by the tests.

    Looked for in ``$BACKPROP_NINJA_NAMES``, then ``../shared/data/names.txt`` beside the clone
    (where CI puts it), then ``data/names.txt`` (after ``backprop-ninja data``). Without it the
    tests that need it are skipped with what to do, except under ``CI=true``, where they fail.
    """
    from autograder.dataset.names import ENV_VAR, verify

    candidates = names_candidates()
    for path in candidates:
        if path.is_file():
            verify(path)
            return path
    message = (
        "names.txt not found: run `backprop-ninja data` (it downloads and verifies it), or set "
        f"{ENV_VAR} to a copy (looked in: {', '.join(map(str, candidates))})"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def grader() -> Iterator[Grader]:
    """The session's grader (seed :data:`SEED`, limits :data:`LIMITS`)."""
    g = Grader(seed=SEED, limits=LIMITS)
    yield g
    g.close()


@pytest.fixture(scope="session")
def grade(grader: Grader) -> Callable[[str, str], StepResult]:
    """``grade(step, code)``: the result of an Exercise 1 answer under the session's grader.

    The whole corpus (:mod:`tests.corpus`) is graded in one batch the first time any answer is
    asked for; other answers are graded one at a time, and every result is kept for the session.
    """
    from autograder.exercises import DEFAULT

    from .corpus import grade_all

    results: dict[tuple[str, str], StepResult] = {}

    def _grade(step: str, code: str) -> StepResult:
        if not results:
            results.update(grade_all(grader))
        if (step, code) not in results:
            results[(step, code)] = grader.grade_code(DEFAULT, DEFAULT.step(step), code)
        return results[(step, code)]

    return _grade


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long modules (marked ``slow``) first. pytest-xdist hands out whole files in this
    order, so a long one never starts last and runs on alone while the other workers idle."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)

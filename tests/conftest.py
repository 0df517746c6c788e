"""Shared fixtures of the kit's tests.

One :class:`~autograder.engine.grader.Grader` serves the whole session (``grader``): building
one starts its sandboxes and the hidden cases, and a test that grades answers only needs one
that is already running. Tests that must see a fresh grader (a seed of their own, limits of
their own) build one and close it.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

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


Corpora = dict[tuple[str, str, str], StepResult]
"""(exercise id, step, code) -> the answer's result under a grader of seed :data:`SEED`."""


def grade_corpora(grader: Grader) -> Corpora:
    """Every answer of the corpora (:mod:`tests.corpus`, :mod:`tests.corpus_lecture`) graded in
    one batch (one submission each)."""
    from autograder.exercises import DEFAULT, EXERCISES

    from .corpus import ALL
    from .corpus_lecture import RIGHT, WRONG

    items = [(DEFAULT.id, a) for a in ALL] + [*WRONG, *RIGHT]
    results = grader.grade_codes(
        [(EXERCISES[e], EXERCISES[e].step(a.step), a.code) for e, a in items]
    )
    return {(e, a.step, a.code): r for (e, a), r in zip(items, results, strict=True)}


@pytest.fixture(scope="session")
def graded_corpora(
    grader: Grader, tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Corpora:
    """:func:`grade_corpora` once for the whole run: under pytest-xdist, the first worker to ask
    grades them and leaves the results (pickled) in the run's shared temporary folder (the
    parent of the workers' own, made for this run), where the others read them (the session
    grader's seed and limits are the same in every worker), as pytest-xdist's documentation
    recommends for work done once per session. Without workers, the session grades them."""
    if worker_id == "master":  # not distributed: nothing to share, and no folder of this run's
        return grade_corpora(grader)
    shared = tmp_path_factory.getbasetemp().parent / "corpora-results.pickle"
    with FileLock(f"{shared}.lock"):
        if shared.is_file():
            results: Corpora = pickle.loads(shared.read_bytes())
            return results
        results = grade_corpora(grader)
        pending = shared.with_suffix(f".{os.getpid()}.tmp")
        pending.write_bytes(pickle.dumps(results))
        pending.replace(shared)  # whole or absent, for the next worker
        return results


def of_exercise(corpora: Corpora, exercise: str) -> dict[tuple[str, str], StepResult]:
    """(step, code) -> result, for the answers of one exercise."""
    return {(step, code): r for (e, step, code), r in corpora.items() if e == exercise}


@pytest.fixture(scope="session")
def graded_corpus(graded_corpora: Corpora) -> dict[tuple[str, str], StepResult]:
    """(step, code) -> result, for every Exercise 1 answer of the corpus."""
    from autograder.exercises import DEFAULT

    return of_exercise(graded_corpora, DEFAULT.id)


@pytest.fixture(scope="session")
def grade(grader: Grader, request: pytest.FixtureRequest) -> Callable[[str, str], StepResult]:
    """``grade(step, code)``: the result of an Exercise 1 answer under the session's grader.

    The whole corpus is graded in one batch the first time any answer is asked for (once for
    the run: :func:`graded_corpora`); other answers are graded one at a time, and every result
    is kept for the session.
    """
    from autograder.exercises import DEFAULT

    results: dict[tuple[str, str], StepResult] = {}

    def _grade(step: str, code: str) -> StepResult:
        if not results:
            results.update(request.getfixturevalue("graded_corpus"))
        if (step, code) not in results:
            results[(step, code)] = grader.grade_code(DEFAULT, DEFAULT.step(step), code)
        return results[(step, code)]

    return _grade


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long modules (marked ``slow``) first. pytest-xdist hands out whole files in this
    order, so a long one never starts last and runs on alone while the other workers idle."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)

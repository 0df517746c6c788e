"""Exercises 2, 3 and 4 graded like Exercise 1: their model answers pass under every hidden case,
their released notebooks score 0, their corpora's correct spellings pass and their slips fail
with the expected diagnosis first, and Exercise 4's update is graded by a training run."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.engine.grader import Grader
from autograder.exercises import EXERCISES, Exercise
from autograder.grading.loading import load_submission
from autograder.grading.results import StepResult

from .corpus import Answer
from .corpus_lecture import RIGHT, WRONG
from .notebooks import make_notebook

LECTURE = [
    EXERCISES[e] for e in ("cross_entropy_backward", "batchnorm_backward", "manual_training")
]
REPO_ROOT = Path(__file__).resolve().parent.parent


def _id(item: tuple[str, Answer]) -> str:
    exercise, a = item
    return f"{exercise}:{a.step}:{a.slip or a.code.splitlines()[-1]}"


@pytest.mark.parametrize("ex", LECTURE, ids=lambda e: e.id)
def test_the_model_answers_pass_every_case_and_a_stub_gets_nothing(
    ex: Exercise, grader: Grader, tmp_path: Path
) -> None:
    solution = grader.run([make_notebook(tmp_path / "solution.ipynb", exercise=ex)])
    sub = solution.submissions[0]
    assert sub.exercise == ex.id and sub.score == sub.max_score == ex.total_points
    assert all(c.passed for s in sub.steps for c in s.cases)
    released = grader.run([make_notebook(tmp_path / "released.ipynb", default="stub", exercise=ex)])
    stub = released.submissions[0]
    assert stub.score == 0
    assert {d.code for s in stub.steps for d in s.diagnoses} == {"not-implemented"}


@pytest.mark.parametrize("item", WRONG, ids=_id)
def test_a_slip_fails_with_its_diagnosis_first(
    item: tuple[str, Answer], graded_corpora: dict[tuple[str, str, str], StepResult]
) -> None:
    exercise, a = item
    r = graded_corpora[(exercise, a.step, a.code)]
    assert not r.passed and r.score == 0
    assert [d.code for d in r.diagnoses][:1] == [a.expect], [d.message for d in r.diagnoses]


@pytest.mark.parametrize("item", RIGHT, ids=_id)
def test_a_correct_spelling_passes_without_diagnosis(
    item: tuple[str, Answer], graded_corpora: dict[tuple[str, str, str], StepResult]
) -> None:
    exercise, a = item
    r = graded_corpora[(exercise, a.step, a.code)]
    assert r.passed and r.diagnoses == [], [d.message for d in r.diagnoses]


def test_every_exercise_has_a_corpus_of_slips_and_correct_spellings() -> None:
    for ex in LECTURE:
        assert sum(1 for e, _ in WRONG if e == ex.id) >= 2, ex.id
        assert sum(1 for e, _ in RIGHT if e == ex.id) >= 2, ex.id


def test_a_wrong_gradient_is_named_as_the_reason_the_training_run_fails(
    grader: Grader, tmp_path: Path
) -> None:
    ex = EXERCISES["manual_training"]
    nb = make_notebook(tmp_path / "one.ipynb", {"dW1": "dW1 = embcat.T @ dhprebn * 2"}, exercise=ex)
    sub = grader.run([nb]).submissions[0]
    assert [s.step for s in sub.steps if not s.passed] == ["dW1", "update"]
    first = sub.step("update").diagnoses[0].message
    assert "`dW1`" in first and "fix it first" in first


@pytest.mark.parametrize("ex", [*EXERCISES.values()], ids=list(EXERCISES))
def test_a_notebook_is_graded_as_its_own_exercise(ex: Exercise) -> None:
    for kind in ("solutions", "exercises"):
        sub = load_submission(REPO_ROOT / kind / ex.id / f"{ex.id}.ipynb")
        assert sub.exercise.id == ex.id

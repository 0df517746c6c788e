"""Exercises 2, 3 and 4 through the real nbgrader with its stock Execute (a kernel per notebook,
the hidden tests calling the kit): each solution gets full marks, as with the kit's preprocessor
in ``test_nbgrader_lecture_exercises.py`` (a module of its own, so that the two run side by
side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.exercises import Exercise

from .nbgrader_course import kit_env, make_course
from .test_nbgrader_lecture_exercises import LECTURE, SEED, Graded, grade

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(names_txt: Path) -> dict[str, str]:
    return kit_env(names_txt, SEED)


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Graded:
    root = make_course(tmp_path_factory.mktemp("lecture-stock") / "backprop-ninja")
    return grade(root, env, stock=True, students=["sol"])


@pytest.mark.parametrize("ex", LECTURE, ids=lambda e: e.id)
def test_stock_execute_gives_the_solution_full_marks_too(ex: Exercise, stock: Graded) -> None:
    assert stock.scores(ex, "sol") == {s.name: s.points for s in ex.steps}
    assert "with the backprop-ninja engine" not in stock.log  # a kernel ran the notebook

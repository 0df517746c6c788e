"""Exercises 2, 3 and 4 through the real nbgrader, as Exercise 1 is in ``test_nbgrader_e2e``: in
one scratch course, each assignment generated, its solution and its untouched release submitted,
and graded with the kit's preprocessor: the solution gets full marks, the release nothing, with
not-implemented on every step. (``test_nbgrader_lecture_stock.py`` grades the solutions with
nbgrader's stock Execute.)"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook

from autograder.course.build import paths
from autograder.exercises import EXERCISES, Exercise

from .nbgrader_course import kit_env, make_course, run_nbgrader, stock_execute_option

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parent.parent
LECTURE = [
    EXERCISES[e] for e in ("cross_entropy_backward", "batchnorm_backward", "manual_training")
]
SEED = 4242


def solution(ex: Exercise) -> NotebookNode:
    nb = nbformat.read(str(REPO_ROOT / paths(ex)["release"]), as_version=4)
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = ex.step(meta["grade_id"]).answer
    return nb


def submit(course: Path, student: str, ex: Exercise, nb: NotebookNode) -> None:
    folder = course / "submitted" / student / ex.id
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / f"{ex.id}.ipynb"))


@dataclass
class Graded:
    course: Path
    log: str

    def scores(self, ex: Exercise, student: str) -> dict[str, float]:
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gb:
            return {
                s.name: float(gb.find_grade(s.test_id, ex.id, ex.id, student).score)
                for s in ex.steps
            }

    def diagnoses(self, ex: Exercise, student: str) -> str:
        path = self.course / "autograded" / student / ex.id / f"{ex.id}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        return "\n".join(
            o.get("text", "") + o.get("evalue", "")
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
        )


def grade(root: Path, env: dict[str, str], stock: bool, students: list[str]) -> Graded:
    """Generate every assignment of the course, submit the lecture exercises' notebooks and
    autograde them: one nbgrader command of each (nbgrader reads the assignment id as a
    pattern)."""
    run_nbgrader(root, "generate_assignment", "*", "--force", env=env).check_returncode()
    for ex in LECTURE:
        for student in students:
            submit(root, student, ex, solution(ex) if student == "sol" else _released(ex))
    args = ["autograde", "*", *([stock_execute_option()] if stock else [])]
    proc = run_nbgrader(root, *args, env=env)
    proc.check_returncode()
    return Graded(root, proc.stdout + proc.stderr)


def _released(ex: Exercise) -> NotebookNode:
    return nbformat.read(str(REPO_ROOT / paths(ex)["release"]), as_version=4)


@pytest.fixture(scope="module")
def env(names_txt: Path) -> dict[str, str]:
    return kit_env(names_txt, SEED)


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Graded:
    root = make_course(tmp_path_factory.mktemp("lecture") / "backprop-ninja")
    return grade(root, env, stock=False, students=["sol", "untouched"])


@pytest.mark.parametrize("ex", LECTURE, ids=lambda e: e.id)
def test_the_kit_gives_the_solution_full_marks_and_the_release_nothing(
    ex: Exercise, kit: Graded
) -> None:
    assert kit.scores(ex, "sol") == {s.name: s.points for s in ex.steps}
    assert set(kit.scores(ex, "untouched").values()) == {0.0}
    assert kit.diagnoses(ex, "untouched").count("[not-implemented]") == len(ex.steps)
    assert "with the backprop-ninja engine" in kit.log


def test_the_scratch_courses_are_the_repositorys(kit: Graded) -> None:
    for ex in LECTURE:
        assert (kit.course / paths(ex)["release"]).is_file()
    shutil.rmtree(kit.course / "feedback", ignore_errors=True)

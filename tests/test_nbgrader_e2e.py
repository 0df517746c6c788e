"""The instructor's workflow with the real nbgrader commands, in a scratch course.

The course holds the repository's ``source/`` and ``nbgrader_config.py``. Students are added,
the assignment generated, submissions made from the released notebook put in ``submitted/``,
then ``nbgrader autograde``, ``export`` (CSV) and ``generate_feedback`` run in the course root,
and ``backprop-ninja grade --json`` grades the same files. A copy of the course grades two of the
submissions again with nbgrader's stock ``Execute`` (a kernel per notebook, the hidden tests
calling ``autograder.incell.check_step``): the scores must agree either way.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.utils import is_grade

from autograder.authoring import ASSIGNMENT, NOTEBOOK
from autograder.catalog import STEPS, total_points
from autograder.nbgrader_grade import RESULT_MIME

from .nbgrader_course import (
    ALLCLOSE_PATCH,
    REPO_ROOT,
    SCATTER_BUG,
    SCRATCH,
    filled,
    grade_id,
    released,
    run_nbgrader,
    stock_execute_option,
    submit,
    with_cell_after,
    with_extra_cell,
    without_cells,
)

pytestmark = pytest.mark.slow

SEED = 271828
NOTEBOOK_ID = Path(NOTEBOOK).stem

EXPECTED = {
    "ada_right": 26.0,
    "ben_untouched": 0.0,
    "cy_scatter_bug": 25.0,
    "di_allclose_patch": 26.0,
    "ed_cells_deleted": 25.0,
    "flo_not_a_notebook": 0.0,
    "gus_skipped_dprobs": 25.0,
}
"""Each student's submission is named for what it holds; the score both graders must give."""

ROSTER = ("ada_right", "ben_untouched", "cy_scatter_bug", "di_allclose_patch")
"""The students added with `nbgrader db student add` before grading."""

STOCK_STUDENTS = ("ada_right", "cy_scatter_bug", "gus_skipped_dprobs")
"""Graded a second time with stock Execute (a kernel each: kept few)."""


def submissions() -> dict[str, NotebookNode | str]:
    return {
        "ada_right": filled(),
        "ben_untouched": released(),
        # and a scratch cell between the dh answer and its check
        "cy_scatter_bug": with_cell_after(filled(SCATTER_BUG), "dh", SCRATCH),
        "di_allclose_patch": with_extra_cell(filled(), ALLCLOSE_PATCH),
        # the dC answer cell and the db1 grade cell deleted (by editing the notebook's JSON)
        "ed_cells_deleted": without_cells(filled(), {"dC", "test_db1"}),
        "flo_not_a_notebook": "this is not a notebook\n",
        # dprobs left as released: in a kernel, every later answer that reads it fails too, but
        # each step is graded on its own answer, so only dprobs is lost, under either grader
        "gus_skipped_dprobs": filled({"dprobs": "# YOUR CODE HERE\nraise NotImplementedError()"}),
    }


@dataclass
class Run:
    """One grading of the course's submissions by nbgrader."""

    course: Path
    autograde: subprocess.CompletedProcess[str]
    csv_scores: dict[str, float]
    feedback: dict[str, str]  # student -> feedback HTML

    def autograded(self, student: str) -> NotebookNode:
        path = self.course / "autograded" / student / ASSIGNMENT / NOTEBOOK
        return nbformat.read(str(path), as_version=4)

    def step_scores(self, student: str) -> dict[str, float]:
        """Each step's score in nbgrader's gradebook."""
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gb:
            return {
                s.name: float(gb.find_grade(s.test_id, NOTEBOOK_ID, ASSIGNMENT, student).score)
                for s in STEPS
            }


def grade_all(course: Path, env: dict[str, str], *options: str) -> Run:
    """autograde, export to CSV and generate_feedback in ``course``."""
    autograde = run_nbgrader(course, "autograde", ASSIGNMENT, *options, env=env)
    run_nbgrader(course, "export", "--to", "grades.csv", env=env).check_returncode()
    with open(course / "grades.csv", newline="") as f:
        csv_scores = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    run_nbgrader(course, "generate_feedback", ASSIGNMENT, env=env).check_returncode()
    feedback = {
        p.parent.parent.name: p.read_text() for p in (course / "feedback").glob("*/*/*.html")
    }
    return Run(course, autograde, csv_scores, feedback)


@pytest.fixture(scope="module")
def env(names_txt: Path) -> dict[str, str]:
    """One seed for nbgrader's graders and the CLI; names.txt for stock Execute's kernels."""
    return {"BACKPROP_NINJA_SEED": str(SEED), "BACKPROP_NINJA_NAMES": str(names_txt)}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """A scratch course: the repository's source and config, students, the released assignment
    and the submissions."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(REPO_ROOT / "source", root / "source")
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    for student in ROSTER:  # autograde adds the others itself (Autograde.create_student)
        run_nbgrader(root, "db", "student", "add", student, env=env).check_returncode()
    run_nbgrader(root, "generate_assignment", ASSIGNMENT, env=env).check_returncode()
    release = root / "exercises" / ASSIGNMENT / NOTEBOOK
    assert release.is_file(), "generate_assignment did not write exercises/: config not loaded?"
    # the submissions are made from the committed release: it must be what nbgrader releases
    assert nbformat.read(str(release), as_version=4).cells == released().cells
    for student, nb in submissions().items():
        submit(root, student, nb, ASSIGNMENT)
    return root


@pytest.fixture(scope="module")
def kit(course: Path, env: dict[str, str]) -> Run:
    """The course graded as configured: GradeWithKit in place of Execute."""
    return grade_all(course, env)


@pytest.fixture(scope="module")
def stock(kit: Run, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A second course, with the same source, config and STOCK_STUDENTS' submissions, graded
    with nbgrader's stock Execute (set on the command line over the course's config)."""
    root = tmp_path_factory.mktemp("stock")
    shutil.copytree(kit.course / "source", root / "source")
    shutil.copy(kit.course / "nbgrader_config.py", root / "nbgrader_config.py")
    run_nbgrader(root, "generate_assignment", ASSIGNMENT, env=env).check_returncode()
    for student in STOCK_STUDENTS:
        shutil.copytree(kit.course / "submitted" / student, root / "submitted" / student)
    run = grade_all(root, env, stock_execute_option())
    run.autograde.check_returncode()
    return run


@pytest.fixture(scope="module")
def cli(kit: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``backprop-ninja grade --json`` on the same submitted files: student -> submission."""
    out = tmp_path_factory.mktemp("cli") / "results.json"
    cmd = [sys.executable, "-m", "autograder.cli", "grade", str(kit.course / "submitted")]
    cmd += ["--json", str(out), "--seed", str(SEED), "--quiet"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    run = json.loads(out.read_text())
    assert run["seed"] == SEED
    return {Path(s["path"]).parent.parent.name: s for s in run["submissions"]}


def cli_steps(sub: dict[str, Any]) -> dict[str, float]:
    return {s["step"]: float(s["score"]) for s in sub["steps"]}


# --- autograde with the kit ----------------------------------------------------------------


def test_nbgraders_scores_equal_backprop_ninja_grade_on_the_same_files(
    kit: Run, cli: dict[str, dict[str, Any]]
) -> None:
    assert kit.csv_scores == EXPECTED
    assert {student: float(sub["score"]) for student, sub in cli.items()} == EXPECTED


def test_every_steps_score_in_the_gradebook_is_the_clis(
    kit: Run, cli: dict[str, dict[str, Any]]
) -> None:
    for student in EXPECTED:
        if student != "flo_not_a_notebook":
            assert kit.step_scores(student) == cli_steps(cli[student]), student


def test_the_scatter_bug_costs_exactly_the_dC_step(kit: Run) -> None:
    right, buggy = kit.step_scores("ada_right"), kit.step_scores("cy_scatter_bug")
    assert {name for name in right if right[name] != buggy[name]} == {"dC"}
    assert (right["dC"], buggy["dC"]) == (1.0, 0.0)
    dc = grade_cell(kit.autograded("cy_scatter_bug"), "test_dC")
    assert "dC: failed (0/1, hidden cases" in stdout(dc)
    assert "[scatter-drops-duplicates]" in stdout(dc)


def test_monkeypatching_allclose_gains_nothing_and_its_cell_never_runs(kit: Run) -> None:
    assert kit.step_scores("di_allclose_patch") == kit.step_scores("ada_right")
    nb = kit.autograded("di_allclose_patch")
    patch = next(c for c in nb.cells if c.source == ALLCLOSE_PATCH)
    assert patch.outputs == [] and patch.execution_count is None


def test_autograde_graded_with_the_configured_preprocessor_and_no_kernel(kit: Run) -> None:
    log = kit.autograde.stdout + kit.autograde.stderr
    assert "with the backprop-ninja engine" in log
    assert "kernel" not in log.lower()
    nb = kit.autograded("ada_right")
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is None
        if is_grade(cell):  # the kit's verdict and result; no output of the visible check
            assert stdout(cell).startswith(f"{str(grade_id(cell))[5:]}: passed (1/1")
            assert any(RESULT_MIME in o.get("data", {}) for o in cell.outputs)
            assert "approximate:" not in stdout(cell)
        else:
            assert cell.outputs == []


def test_a_broken_submission_gets_a_clear_result_and_the_batch_goes_on(kit: Run) -> None:
    log = kit.autograde.stdout + kit.autograde.stderr
    failed = re.findall(r"error processing assignment '\w+' for student '(\w+)'", log)
    assert failed == ["flo_not_a_notebook"]  # nbgrader itself cannot read the file
    assert kit.autograde.returncode != 0  # ...and says so in its exit status
    nb = kit.autograded("ed_cells_deleted")
    assert "[missing-cell]" in stdout(grade_cell(nb, "test_dC"))
    assert stdout(grade_cell(nb, "test_db1")).startswith("db1: passed")  # put back, graded
    assert kit.step_scores("ed_cells_deleted")["db1"] == 1.0


def test_feedback_shows_every_verdict_and_the_kits_page_but_never_hidden_tests(kit: Run) -> None:
    graded = [s for s in EXPECTED if s != "flo_not_a_notebook"]
    assert sorted(kit.feedback) == sorted(graded)
    for student, page in kit.feedback.items():
        assert "BEGIN HIDDEN TESTS" not in page and "check_step(" not in page, student
        assert "autograder.incell" not in page, student
        assert "Backprop ninja: your feedback" in page, student  # the kit's page, on top
        for step in STEPS:  # each grade cell's verdict line, as its output
            verdict = rf"(?:^|>){re.escape(step.name)}: (?:passed|failed) \(\d+/1, hidden cases"
            assert re.search(verdict, page, re.MULTILINE), (student, step.name)
    buggy = kit.feedback["cy_scatter_bug"]
    assert "dC: failed (0/1" in buggy and "[scatter-drops-duplicates]" in buggy
    assert f"Score: {total_points() - 1:.1f} / {total_points():.1f}" in buggy


# --- a course that keeps stock Execute -----------------------------------------------------


def test_stock_execute_gives_the_same_scores_step_by_step(kit: Run, stock: Run) -> None:
    assert stock.csv_scores == {s: EXPECTED[s] for s in STOCK_STUDENTS}
    for student in STOCK_STUDENTS:
        assert stock.step_scores(student) == kit.step_scores(student), student


def test_stock_execute_really_ran_the_notebook_in_a_kernel(stock: Run) -> None:
    nb = stock.autograded("cy_scatter_bug")
    dc = grade_cell(nb, "test_dC")
    assert f"dC: failed (0/1, hidden cases, seed {SEED})" in stdout(dc)  # check_step ran
    assert not any(RESULT_MIME in o.get("data", {}) for o in dc.outputs)
    db1 = stdout(grade_cell(nb, "test_db1"))
    assert "db1: passed" in db1 and "approximate: True" in db1  # then the visible check


def test_with_stock_execute_a_skipped_step_costs_only_itself(stock: Run) -> None:
    nb = stock.autograded("gus_skipped_dprobs")
    # dprobs and every later answer cell failed in the kernel (dlogprobs is there, dprobs not);
    # the hidden test grades each answer on its own, then the visible check finds no tensor
    after = stdout(grade_cell(nb, "test_dcounts_sum_inv"))
    assert "dcounts_sum_inv: passed" in after and "not a tensor" in after
    assert stock.step_scores("gus_skipped_dprobs")["dprobs"] == 0.0


def test_with_stock_execute_a_scratch_cell_before_a_check_changes_nothing(stock: Run) -> None:
    nb = stock.autograded("cy_scatter_bug")
    scratch = next(c for c in nb.cells if c.source == SCRATCH)
    assert "torch.Size" in stdout(scratch)  # it ran just before test_dh, as In[-2]
    assert "\ndh " in stdout(grade_cell(nb, "test_dh"))  # the visible check, after the verdict
    assert "dh: passed (1/1" in stdout(grade_cell(nb, "test_dh"))
    assert stock.step_scores("cy_scatter_bug")["dh"] == 1.0


def test_stock_execute_feedback_shows_the_diagnosis_but_never_hidden_tests(stock: Run) -> None:
    for student, page in stock.feedback.items():
        assert "BEGIN HIDDEN TESTS" not in page and "check_step(" not in page, student
    assert "AssertionError: [scatter-drops-duplicates]" in stock.feedback["cy_scatter_bug"]


# --- helpers -------------------------------------------------------------------------------


def grade_cell(nb: NotebookNode, gid: str) -> NotebookNode:
    return next(c for c in nb.cells if grade_id(c) == gid)


def stdout(cell: NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")

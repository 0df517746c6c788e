"""nbgrader's stock ``Execute`` and ``nbgrader validate``, in a scratch course of their own.

A course keeps nbgrader's stock ``Execute`` (a kernel per notebook, the hidden tests calling
``autograder.incell.check_step``) for a few of the submissions of ``test_nbgrader_e2e.py``: the
scores must be ``backprop-ninja grade``'s step by step (that module checks the kit's
preprocessor against the same command), hidden tests never show in the feedback, and a student's
cells change nothing. Then ``nbgrader validate`` runs the bundled buggy and solution notebooks.
Nothing of nbgrader is mocked; each command runs once per module (a module of its own, so that
it runs beside the other end-to-end module).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autograder.cli import main
from autograder.integrations.nbgrader_grade import RESULT_MIME

from .nbgrader_course import (
    ALLCLOSE_PATCH,
    ASSIGNMENT,
    EXPECTED,
    PATHS,
    REPO_ROOT,
    SCRATCH,
    SEED,
    STOCK_STUDENTS,
    Run,
    cli_steps,
    grade_cell,
    kit_env,
    make_course,
    read_export,
    read_feedback,
    run_nbgrader,
    stdout,
    stock_execute_option,
    submissions,
    submit,
)
from .test_nbgrader_grade import Tags

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(names_txt: Path) -> dict[str, str]:
    return kit_env(names_txt)


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Run:
    """A course with the repository's source and config and STOCK_STUDENTS' submissions,
    graded with nbgrader's stock Execute (set on the command line over the course's config)."""
    root = make_course(tmp_path_factory.mktemp("stock") / "backprop-ninja")
    run_nbgrader(root, "generate_assignment", ASSIGNMENT, env=env).check_returncode()
    made = submissions()
    for student in STOCK_STUDENTS:
        submit(root, student, made[student])
    autograde = run_nbgrader(root, "autograde", ASSIGNMENT, stock_execute_option(), env=env)
    autograde.check_returncode()
    run_nbgrader(root, "export", "--to", "grades.csv", env=env).check_returncode()
    run_nbgrader(root, "generate_feedback", ASSIGNMENT, env=env).check_returncode()
    return Run(root, autograde, read_export(root), read_feedback(root))


@pytest.fixture(scope="module")
def cli(stock: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``backprop-ninja grade --json`` on the same submitted files: student -> submission."""
    out = tmp_path_factory.mktemp("cli") / "results.json"
    args = ["grade", str(stock.course / "submitted"), "--json", str(out), "--seed", str(SEED)]
    assert main([*args, "--quiet"]) == 0  # in this process (test_cli runs the program itself)
    run = json.loads(out.read_text())
    assert run["seed"] == SEED
    return {Path(s["path"]).parent.parent.name: s for s in run["submissions"]}


@pytest.fixture(scope="module")
def validated(stock: Run, env: dict[str, str]) -> dict[str, subprocess.CompletedProcess[str]]:
    """``nbgrader validate`` on copies of the bundled buggy and solution notebooks."""
    course = stock.course
    folder = course / "to_validate"
    folder.mkdir()
    runs = {}
    for key in ("buggy", "solution"):
        path = folder / f"{key}.ipynb"
        shutil.copy(REPO_ROOT / PATHS[key], path)
        runs[key] = run_nbgrader(course, "validate", str(path), env=env)
    return runs


# --- a course that keeps stock Execute -----------------------------------------------------


def test_stock_execute_gives_the_same_scores_step_by_step(
    stock: Run, cli: dict[str, dict[str, Any]]
) -> None:
    # and test_nbgrader_e2e checks the kit's preprocessor against the CLI on the same files
    assert stock.csv_scores == {s: EXPECTED[s] for s in STOCK_STUDENTS}
    for student in STOCK_STUDENTS:
        assert stock.step_scores(student) == cli_steps(cli[student]), student


def test_stock_execute_really_ran_the_notebook_in_a_kernel(stock: Run) -> None:
    nb = stock.autograded("cy_scatter_bug")
    dc = grade_cell(nb, "test_dC")
    assert f"dC: failed (0/1, hidden cases, seed {SEED})" in stdout(dc)  # check_step ran
    assert not any(RESULT_MIME in o.get("data", {}) for o in dc.outputs)
    (error,) = [o for o in dc.outputs if o.output_type == "error"]  # how stock Execute scores 0
    assert error.ename == "AssertionError" and "[scatter-drops-duplicates]" in error.evalue
    db1 = stdout(grade_cell(nb, "test_db1"))
    assert "db1: passed" in db1 and "approximate: True" in db1  # then the visible check
    # nbgrader put the hidden tests back without a checksum warning
    assert stock.checksum_warnings() == {}


def test_with_stock_execute_monkeypatching_allclose_gains_nothing(stock: Run) -> None:
    nb = stock.autograded("di_allclose_patch")
    patch = next(c for c in nb.cells if c.source == ALLCLOSE_PATCH)
    assert patch.execution_count is not None  # it ran, in the kernel
    assert "dC: failed (0/1" in stdout(grade_cell(nb, "test_dC"))
    assert stock.step_scores("di_allclose_patch")["dC"] == 0.0


def test_with_stock_execute_a_skipped_step_costs_only_itself(stock: Run) -> None:
    nb = stock.autograded("gus_skipped_dprobs")
    # dprobs and the next answer cell, which reads it, failed in the kernel; yet the hidden test
    # grades each answer on its own, and so does the visible check
    answer = grade_cell(nb, "dcounts_sum_inv")
    (error,) = [o for o in answer.outputs if o.output_type == "error"]
    assert error.ename == "NameError" and "dprobs" in error.evalue
    after = stdout(grade_cell(nb, "test_dcounts_sum_inv"))
    assert after.startswith("dcounts_sum_inv: passed") and "approximate: True" in after
    assert stock.step_scores("gus_skipped_dprobs")["dprobs"] == 0.0


def test_with_stock_execute_a_scratch_cell_before_a_check_changes_nothing(stock: Run) -> None:
    nb = stock.autograded("cy_scatter_bug")
    scratch = next(c for c in nb.cells if c.source == SCRATCH)
    assert "torch.Size" in stdout(scratch)  # it ran just before test_dh, as In[-2]
    dh = grade_cell(nb, "test_dh")
    # the hidden test graded the answer cell; the visible check then checked the scratch cell
    # (the latest that assigns dh) and printed why it fails, but under autograde did not raise
    assert stdout(dh).startswith("dh: passed (1/1")
    assert re.search(r"^dh +\|", stdout(dh), re.MULTILINE), stdout(dh)
    assert "dh is not right yet" not in str(dh.outputs)
    assert not any(o.output_type == "error" for o in dh.outputs)
    assert stock.step_scores("cy_scatter_bug")["dh"] == 1.0


def test_stock_execute_feedback_shows_the_verdicts_safely_but_never_hidden_tests(
    stock: Run,
) -> None:
    for student, page in stock.feedback.items():
        assert "BEGIN HIDDEN TESTS" not in page and "check_step(" not in page, student
        assert "Step 26 of 26: dC</a>" in page, student
    page = stock.feedback["cy_scatter_bug"]
    # the verdict line, and the diagnosis as the error's message, cut to its last line
    assert "dC: failed (0/1" in page and "AssertionError: [scatter-drops-duplicates]" in page
    tags = Tags(page)
    assert tags.handlers() == [] and not any("alert" in s for s in tags.scripts)
    assert "<b>bold</b>" in page  # the HTML the student's cell displayed, cleaned


# --- nbgrader validate ---------------------------------------------------------------------


def failing_checks(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """The steps whose check cell `nbgrader validate` reports as failing."""
    return set(re.findall(r"The following cell failed:\s+CHECKS\.check\('(\w+)'\)", proc.stdout))


def test_validate_reports_the_failing_steps_of_the_buggy_notebook(
    validated: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    buggy = validated["buggy"]
    assert "VALIDATION FAILED ON 4 CELL(S)" in buggy.stdout, buggy.stdout + buggy.stderr
    assert failing_checks(buggy) == {"dcounts", "dbndiff2", "dbnmeani", "dC"}
    # each with the check's diagnosis, as the student sees it in the notebook
    for step, code in (
        ("dcounts", "missing-branch"),
        ("dbndiff2", "wrong-scale"),
        ("dbnmeani", "shape-mismatch"),
        ("dC", "scatter-drops-duplicates"),
    ):
        assert f"AssertionError: {step} is not right yet: [{code}]" in buggy.stdout, step


def test_validate_passes_the_solution_notebook(
    validated: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    solution = validated["solution"]
    assert "Success! Your notebook passes all the tests." in solution.stdout, (
        solution.stdout + solution.stderr
    )
    assert failing_checks(solution) == set()

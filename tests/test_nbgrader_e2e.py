"""The instructor's workflow with the real nbgrader commands, in a scratch course.

The course holds the repository's ``source/`` and ``nbgrader_config.py``. The README's own
commands run there verbatim, in a shell whose PATH lacks the kit's environment until the
README's ``source .venv/bin/activate``: the roster is imported from a CSV file, the assignment
generated, submissions made from the released notebook put in ``submitted/``, then
``nbgrader autograde``, ``export`` (CSV) and ``generate_feedback``; ``backprop-ninja grade
--json`` grades the same files. A second course grades a few of the submissions with nbgrader's
stock ``Execute`` (a kernel per notebook, the hidden tests calling
``autograder.incell.check_step``): the scores must agree step by step either way. Then
``nbgrader validate`` runs the bundled buggy and solution notebooks. Nothing of nbgrader is
mocked; each command runs once per module.
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

from autograder.integrations.nbgrader_grade import RESULT_MIME

from .nbgrader_course import (
    ALLCLOSE_PATCH,
    ASSIGNMENT,
    EXERCISE,
    HOSTILE_MARKDOWN,
    HOSTILE_OUTPUT,
    NOTEBOOK,
    NOTEBOOK_ID,
    PATHS,
    REPO_ROOT,
    SCATTER_BUG,
    SCRATCH,
    filled,
    grade_id,
    link_venv,
    make_course,
    readme_command,
    readme_commands,
    released,
    run_nbgrader,
    run_readme,
    stock_execute_option,
    stub,
    submit,
    with_cell_after,
    with_extra_cell,
    with_source,
    without_cells,
)
from .test_nbgrader_grade import Tags

pytestmark = pytest.mark.slow

SEED = 271828
STEPS = EXERCISE.steps
TOTAL = float(sum(s.points for s in STEPS))

EXPECTED = {
    "ada_right": TOTAL,
    "ben_untouched": 0.0,
    "cy_scatter_bug": TOTAL - 1,
    "di_allclose_patch": TOTAL - 1,
    "ed_cells_deleted": TOTAL - 1,
    "flo_not_a_notebook": 0.0,
    "gus_skipped_dprobs": TOTAL - 1,
    "hal_edited_locked_cells": TOTAL,
}
"""Each student's submission is named for what it holds; the score both graders must give."""

ROSTER = {
    "ada_right": ("Ada", "Lovelace"),
    "ben_untouched": ("Ben", "Franklin"),
    "cy_scatter_bug": ("Cy", "Young"),
    "di_allclose_patch": ("Di", "Prince"),
}
"""The students of students.csv, imported before grading; autograde adds the others itself."""

STOCK_STUDENTS = ("ada_right", "cy_scatter_bug", "di_allclose_patch", "gus_skipped_dprobs")
"""Graded a second time with stock Execute (a kernel each: kept few)."""

EDITED_CHECK = "print('dC is right, trust me')"
"""What hal wrote over the visible check of dC (a locked grade cell)."""


def submissions() -> dict[str, NotebookNode | str]:
    return {
        "ada_right": filled(),
        "ben_untouched": released(),
        # and a scratch cell between the dh answer and its check, and a note and a cell whose
        # HTML would run script in a page that shows it as it is
        "cy_scatter_bug": with_extra_cell(
            with_extra_cell(
                with_cell_after(filled(SCATTER_BUG), "dh", SCRATCH),
                HOSTILE_MARKDOWN,
                markdown=True,
            ),
            HOSTILE_OUTPUT,
        ),
        # the scatter bug, and a cell that makes every visible check say `approximate: True`
        "di_allclose_patch": with_extra_cell(filled(SCATTER_BUG), ALLCLOSE_PATCH),
        # the dC answer cell and the db1 grade cell deleted (by editing the notebook's JSON)
        "ed_cells_deleted": without_cells(filled(), {"dC", "test_db1"}),
        "flo_not_a_notebook": "this is not a notebook\n",
        # dprobs left as released: in a kernel, every later answer that reads it fails too, but
        # each step is graded on its own answer, so only dprobs is lost, under either grader
        "gus_skipped_dprobs": filled({"dprobs": stub("dprobs")}),
        # two locked cells edited (in the notebook's JSON): nbgrader restores them
        "hal_edited_locked_cells": with_source(
            with_source(filled(), "test_dC", EDITED_CHECK),
            "setup_params",
            next(c.source for c in released().cells if grade_id(c) == "setup_params")
            + "\nW1 = W1 * 0",
        ),
    }


@dataclass
class Run:
    """One grading of a course's submissions by nbgrader."""

    course: Path
    autograde: subprocess.CompletedProcess[str]
    csv_rows: dict[str, dict[str, str]]  # student -> row of `nbgrader export`
    feedback: dict[str, str]  # student -> feedback HTML

    @property
    def log(self) -> str:
        return self.autograde.stdout + self.autograde.stderr

    @property
    def csv_scores(self) -> dict[str, float]:
        return {s: float(row["score"]) for s, row in self.csv_rows.items()}

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

    def checksum_warnings(self) -> dict[str, set[str]]:
        """student -> the cells for which autograde warned "Attribute 'checksum' ... changed"."""
        found: dict[str, set[str]] = {}
        student = ""
        for line in self.log.splitlines():
            sanitizing = re.search(r"Sanitizing .*/submitted/([^/]+)/", line)
            if sanitizing:
                student = sanitizing.group(1)
            changed = re.search(r"Attribute 'checksum' for cell (\S+) has changed", line)
            if changed:
                found.setdefault(student, set()).add(changed.group(1))
        return found


def read_feedback(course: Path) -> dict[str, str]:
    return {p.parent.parent.name: p.read_text() for p in (course / "feedback").glob("*/*/*.html")}


def read_export(course: Path) -> dict[str, dict[str, str]]:
    with open(course / "grades.csv", newline="") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def env(names_txt: Path) -> dict[str, str]:
    """One seed for nbgrader's graders and the CLI; names.txt for the kernels."""
    return {"BACKPROP_NINJA_SEED": str(SEED), "BACKPROP_NINJA_NAMES": str(names_txt)}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """A scratch course: the repository's source and config, the roster imported and the
    assignment generated with the README's commands, and the submissions."""
    root = make_course(tmp_path_factory.mktemp("course") / "backprop-ninja")
    link_venv(root)
    with open(root / "students.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "first_name", "last_name", "email"])
        for student, (first, last) in ROSTER.items():
            writer.writerow([student, first, last, f"{first.lower()}@example.org"])
    for command in (
        readme_command("nbgrader db student import"),
        readme_command("nbgrader generate_assignment"),
    ):
        run_readme(root, command, env=env).check_returncode()
    release = root / PATHS["release"]
    assert release.is_file(), "generate_assignment did not write exercises/: config not loaded?"
    # the submissions are made from the committed release: it must be what nbgrader releases
    assert nbformat.read(str(release), as_version=4).cells == released().cells
    for student, nb in submissions().items():
        submit(root, student, nb)
    return root


@pytest.fixture(scope="module")
def kit(course: Path, env: dict[str, str]) -> Run:
    """The course graded as configured (GradeWithKit in place of Execute), with the README's
    commands."""
    autograde = run_readme(course, readme_command("nbgrader autograde"), env=env)
    run_readme(course, readme_command("nbgrader export"), env=env).check_returncode()
    run_readme(course, readme_command("nbgrader generate_feedback"), env=env).check_returncode()
    return Run(course, autograde, read_export(course), read_feedback(course))


@pytest.fixture(scope="module")
def stock(kit: Run, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A second course, with the same source, config and STOCK_STUDENTS' submissions, graded
    with nbgrader's stock Execute (set on the command line over the course's config)."""
    root = make_course(tmp_path_factory.mktemp("stock") / "backprop-ninja")
    run_nbgrader(root, "generate_assignment", ASSIGNMENT, env=env).check_returncode()
    for student in STOCK_STUDENTS:
        shutil.copytree(kit.course / "submitted" / student, root / "submitted" / student)
    autograde = run_nbgrader(root, "autograde", ASSIGNMENT, stock_execute_option(), env=env)
    autograde.check_returncode()
    run_nbgrader(root, "export", "--to", "grades.csv", env=env).check_returncode()
    run_nbgrader(root, "generate_feedback", ASSIGNMENT, env=env).check_returncode()
    return Run(root, autograde, read_export(root), read_feedback(root))


@pytest.fixture(scope="module")
def cli(kit: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``backprop-ninja grade --json`` on the same submitted files: student -> submission."""
    out = tmp_path_factory.mktemp("cli") / "results.json"
    cmd = [sys.executable, "-m", "autograder", "grade", str(kit.course / "submitted")]
    cmd += ["--json", str(out), "--seed", str(SEED), "--quiet"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    run = json.loads(out.read_text())
    assert run["seed"] == SEED
    return {Path(s["path"]).parent.parent.name: s for s in run["submissions"]}


def cli_steps(sub: dict[str, Any]) -> dict[str, float]:
    return {s["step"]: float(s["score"]) for s in sub["steps"]}


@pytest.fixture(scope="module")
def validated(course: Path, env: dict[str, str]) -> dict[str, subprocess.CompletedProcess[str]]:
    """``nbgrader validate`` on copies of the bundled buggy and solution notebooks."""
    folder = course / "to_validate"
    folder.mkdir()
    runs = {}
    for key in ("buggy", "solution"):
        path = folder / f"{key}.ipynb"
        shutil.copy(REPO_ROOT / PATHS[key], path)
        runs[key] = run_nbgrader(course, "validate", str(path), env=env)
    return runs


# --- the README's commands and the course's configuration ---------------------------------


def test_the_readme_activates_the_environment_before_any_nbgrader_command() -> None:
    commands = readme_commands()
    assert commands[0] == "source .venv/bin/activate"
    first_nbgrader = next(c for c in commands if c.startswith("nbgrader "))
    assert first_nbgrader == "nbgrader db student import students.csv"
    readme = (REPO_ROOT / "README.md").read_text()
    assert "id,first_name,last_name,email" in readme


def test_the_course_config_was_the_one_nbgrader_used(kit: Run) -> None:
    # the release went where the config puts it (nbgrader's default is release/)
    assert (kit.course / PATHS["release"]).is_file()
    assert not (kit.course / "release").exists()
    # autograde graded with the kit's preprocessor, in no kernel
    assert "with the backprop-ninja engine" in kit.log
    assert "kernel" not in kit.log.lower()
    # the feedback was written by the kit's exporter and preprocessors
    page = kit.feedback["ada_right"]
    assert "Step 1 of 26: dlogprobs" in page and "Backprop ninja: your feedback" in page


def test_the_imported_roster_keeps_its_names_and_autograde_adds_the_others_without(
    kit: Run,
) -> None:
    rows = kit.csv_rows
    for student, (first, last) in ROSTER.items():
        assert (rows[student]["first_name"], rows[student]["last_name"]) == (first, last)
        assert rows[student]["email"] == f"{first.lower()}@example.org"
    for student in set(EXPECTED) - set(ROSTER):  # what the README warns about
        assert rows[student]["first_name"] in ("", "None"), student


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


def test_the_untouched_notebook_says_not_implemented_on_every_step(kit: Run) -> None:
    nb = kit.autograded("ben_untouched")
    for step in STEPS:
        assert "[not-implemented]" in stdout(grade_cell(nb, step.test_id)), step.name
    assert set(kit.step_scores("ben_untouched").values()) == {0.0}


def test_the_scatter_bug_costs_exactly_the_dC_step(kit: Run) -> None:
    right, buggy = kit.step_scores("ada_right"), kit.step_scores("cy_scatter_bug")
    assert {name for name in right if right[name] != buggy[name]} == {"dC"}
    assert (right["dC"], buggy["dC"]) == (1.0, 0.0)
    dc = grade_cell(kit.autograded("cy_scatter_bug"), "test_dC")
    assert "dC: failed (0/1, hidden cases" in stdout(dc)
    assert "[scatter-drops-duplicates]" in stdout(dc)


def test_monkeypatching_allclose_gains_nothing_and_its_cell_never_runs(kit: Run) -> None:
    assert kit.step_scores("di_allclose_patch") == kit.step_scores("cy_scatter_bug")
    nb = kit.autograded("di_allclose_patch")
    patch = next(c for c in nb.cells if c.source == ALLCLOSE_PATCH)
    assert patch.outputs == [] and patch.execution_count is None


def test_autograde_graded_with_the_configured_preprocessor_and_no_kernel(kit: Run) -> None:
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
    failed = re.findall(r"error processing assignment '\w+' for student '(\w+)'", kit.log)
    assert failed == ["flo_not_a_notebook"]  # nbgrader itself cannot read the file
    assert kit.autograde.returncode != 0  # ...and says so in its exit status
    nb = kit.autograded("ed_cells_deleted")
    assert "[missing-cell]" in stdout(grade_cell(nb, "test_dC"))
    assert stdout(grade_cell(nb, "test_db1")).startswith("db1: passed")  # put back, graded
    assert kit.step_scores("ed_cells_deleted")["db1"] == 1.0


def test_autograde_warns_about_changed_locked_cells_only_and_restores_them(kit: Run) -> None:
    # no false alarm for the 26 grade cells of each untouched submission (nbgrader #1961)
    assert kit.checksum_warnings() == {"hal_edited_locked_cells": {"test_dC", "setup_params"}}
    nb = kit.autograded("hal_edited_locked_cells")
    source = nbformat.read(str(kit.course / PATHS["source"]), as_version=4)
    original = {grade_id(c): c.source for c in source.cells}
    for gid in ("test_dC", "setup_params"):
        assert grade_cell(nb, gid).source == original[gid]  # nbgrader put the source back
    assert kit.step_scores("hal_edited_locked_cells")["dC"] == 1.0
    # an untouched submission's grade cells got their hidden tests back all the same
    assert grade_cell(kit.autograded("ada_right"), "test_dC").source == original["test_dC"]


# --- feedback ------------------------------------------------------------------------------


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
    assert f"Score: {TOTAL - 1:.1f} / {TOTAL:.1f}" in buggy


def test_the_feedback_header_names_each_step_with_its_score(kit: Run) -> None:
    for student, page in kit.feedback.items():
        scores = kit.step_scores(student)
        assert "Test cell" not in page, student
        for i, step in enumerate(STEPS, start=1):
            entry = f'<a href="#{step.test_id}">Step {i} of {len(STEPS)}: {step.name}</a>'
            assert f"{entry} (Score: {scores[step.name]:.1f} / 1.0)" in page, (student, step)


def test_feedback_runs_no_script_from_a_students_markdown_and_still_shows_the_page(
    kit: Run,
) -> None:
    page = kit.feedback["cy_scatter_bug"]
    tags = Tags(page)
    assert tags.handlers() == [("iframe", "onload")]  # the kit's page sizing itself, only
    assert not any("alert" in s for s in tags.scripts)
    assert not any((a.get("href") or "").startswith("javascript") for _, a in tags.tags)
    assert "My notes" in page and "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert 'title="backprop-ninja feedback"' in page


# --- a course that keeps stock Execute -----------------------------------------------------


def test_stock_execute_gives_the_same_scores_step_by_step(
    kit: Run, stock: Run, cli: dict[str, dict[str, Any]]
) -> None:
    assert stock.csv_scores == {s: EXPECTED[s] for s in STOCK_STUDENTS}
    for student in STOCK_STUDENTS:
        assert stock.step_scores(student) == kit.step_scores(student), student
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


# --- helpers -------------------------------------------------------------------------------


def grade_cell(nb: NotebookNode, gid: str) -> NotebookNode:
    return next(c for c in nb.cells if grade_id(c) == gid)


def stdout(cell: NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")

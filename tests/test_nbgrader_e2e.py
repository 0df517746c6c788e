"""The instructor's workflow with the real nbgrader commands, in a scratch course.

The course holds the repository's ``source/`` and ``nbgrader_config.py``. The README's own
commands run there verbatim, in a shell whose PATH lacks the kit's environment until the
README's ``source .venv/bin/activate``: the roster is imported from a CSV file, the assignment
generated, submissions made from the released notebook put in ``submitted/``, then
``nbgrader autograde``, ``export`` (CSV) and ``generate_feedback``; ``backprop-ninja grade
--json`` grades the same files. Nothing of nbgrader is mocked; each command runs once per module.
(``test_nbgrader_stock.py`` does the same with nbgrader's stock ``Execute``, and runs
``nbgrader validate``.)
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbgrader.utils import is_grade

from autograder.cli import main
from autograder.integrations.nbgrader_grade import RESULT_MIME

from .nbgrader_course import (
    ALLCLOSE_PATCH,
    EXPECTED,
    PATHS,
    REPO_ROOT,
    ROSTER,
    SEED,
    STEPS,
    TOTAL,
    Run,
    cli_steps,
    grade_cell,
    grade_id,
    kit_env,
    link_venv,
    make_course,
    read_export,
    read_feedback,
    readme_command,
    readme_commands,
    released,
    run_readme,
    stdout,
    submissions,
    submit,
)
from .test_nbgrader_grade import Tags

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(names_txt: Path) -> dict[str, str]:
    return kit_env(names_txt)


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
def cli(kit: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``backprop-ninja grade --json`` on the same submitted files: student -> submission."""
    out = tmp_path_factory.mktemp("cli") / "results.json"
    args = ["grade", str(kit.course / "submitted"), "--json", str(out), "--seed", str(SEED)]
    assert main([*args, "--quiet"]) == 0  # in this process (test_cli runs the program itself)
    run = json.loads(out.read_text())
    assert run["seed"] == SEED
    return {Path(s["path"]).parent.parent.name: s for s in run["submissions"]}


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

"""The hidden suite as a course's CI runs it: ``pytest --pyargs autograder --submission PATH``.

Driven with pytest's own ``pytester``: a real pytest session, in a subprocess (it grades in
sandboxes of its own), against real notebooks.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import autograder

from .notebooks import SCATTER_BUG_CODE, make_notebook

pytest_plugins = ["pytester"]


def run_suite(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--pyargs", "autograder", "-p", "no:cacheprovider", *map(str, args), timeout=600
    )


def test_one_test_per_step_and_failures_show_the_diagnosis(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    nb = make_notebook(tmp_path / "student.ipynb", {"dC": SCATTER_BUG_CODE})
    r = run_suite(pytester, "--submission", nb, "--bn-seed", "5", "-rf")
    r.assert_outcomes(passed=26, failed=1)  # 26 steps and the readability check
    out = r.stdout.str()
    assert "FAILED" in out and "test_step[dC]" in out
    assert "[scatter-drops-duplicates]" in out
    assert "seed 5" in out


def test_a_correct_submission_passes_every_step(pytester: pytest.Pytester, tmp_path: Path) -> None:
    nb = make_notebook(tmp_path / "student.ipynb")
    run_suite(pytester, "--submission", nb).assert_outcomes(passed=27)


PASSES_EVERYTHING = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
"""
"""A student's pytest plugin: every test of the session passes."""


def test_settings_in_the_students_folder_stop_grading_and_the_documented_command_reads_none(
    pytester: pytest.Pytester,
) -> None:
    # a course's CI starts pytest in the student's checkout, where this sits beside the notebook
    pytester.makeini("[pytest]\npythonpath = .\naddopts = -p passes_everything\n")
    pytester.makepyfile(passes_everything=PASSES_EVERYTHING)
    nb = make_notebook(pytester.path / "student.ipynb", default="stub")
    r = run_suite(pytester, "--submission", nb)
    assert r.ret == pytest.ExitCode.USAGE_ERROR, r.stdout.str()
    assert "-c /dev/null" in r.stderr.str()
    # -c /dev/null: no settings read, the plugin never loaded, the stubs fail every step
    run_suite(pytester, "-c", "/dev/null", "--submission", nb).assert_outcomes(passed=1, failed=26)


def test_a_conftest_in_a_folder_above_the_kit_is_never_loaded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a CI job that installs the kit into a virtual environment inside the student's checkout:
    # the student's conftest.py sits above the hidden suite, where pytest looks for conftests
    site = pytester.path / ".venv" / "lib" / "site-packages"
    kit = Path(autograder.__file__).parent
    shutil.copytree(kit, site / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makeconftest(PASSES_EVERYTHING)
    nb = make_notebook(pytester.path / "student.ipynb", default="stub")
    r = run_suite(pytester, "-c", "/dev/null", "--submission", nb)
    r.assert_outcomes(passed=1, failed=26)
    # the copy inside the checkout was the suite collected
    assert ".venv/lib/site-packages/autograder/test_submission.py" in r.stdout.str()


def test_the_suite_says_what_it_needs_without_a_submission(pytester: pytest.Pytester) -> None:
    r = run_suite(pytester)
    assert r.ret != 0
    assert "--submission" in r.stdout.str() + r.stderr.str()

"""The hidden suite as a course's CI runs it: ``pytest --pyargs autograder --submission PATH``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .notebooks import SCATTER_BUG_CODE, make_notebook


def run_suite(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "autograder",
            "-p",
            "no:cacheprovider",
            *map(str, args),
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_one_test_per_step_and_failures_show_the_diagnosis(tmp_path: Path) -> None:
    nb = make_notebook(tmp_path / "student.ipynb", {"dC": SCATTER_BUG_CODE})
    r = run_suite("--submission", nb, "--bn-seed", "5", "-rf", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 26 passed" in r.stdout  # 26 steps and the readability check
    assert "FAILED" in r.stdout and "test_step[dC]" in r.stdout
    assert "[scatter-drops-duplicates]" in r.stdout
    assert "seed 5" in r.stdout


def test_a_correct_submission_passes_every_step(tmp_path: Path) -> None:
    nb = make_notebook(tmp_path / "student.ipynb")
    r = run_suite("--submission", nb, cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    assert "27 passed" in r.stdout


def test_the_suite_says_what_it_needs_without_a_submission(tmp_path: Path) -> None:
    r = run_suite(cwd=tmp_path)
    assert r.returncode != 0
    assert "--submission" in r.stdout + r.stderr

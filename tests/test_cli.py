"""``backprop-ninja grade`` from a shell: tables, JSON, Gradescope, exit codes, resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .notebooks import SCATTER_BUG_CODE, make_notebook

CLI = [sys.executable, "-m", "autograder.cli"]


def grade(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [*CLI, "grade", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_grading_one_notebook_prints_a_table_and_exits_zero_whatever_the_score(
    tmp_path: Path,
) -> None:
    nb = make_notebook(tmp_path / "student.ipynb", {"dC": SCATTER_BUG_CODE})
    r = grade(nb, "--seed", "7")
    assert r.returncode == 0, r.stderr
    assert "25/26" in r.stdout
    assert "scatter-drops-duplicates" in r.stdout
    assert "seed 7" in r.stdout


def test_json_output_has_the_documented_fields(tmp_path: Path) -> None:
    make_notebook(tmp_path / "class" / "a.ipynb")
    make_notebook(tmp_path / "class" / "b.ipynb", default="stub")
    out = tmp_path / "results.json"
    r = grade(tmp_path / "class", "--json", out, "--seed", "3", "--jobs", "2")
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["seed"] == 3
    subs = {Path(s["path"]).name: s for s in data["submissions"]}
    assert set(subs) == {"a.ipynb", "b.ipynb"}
    assert subs["a.ipynb"]["score"] == 26 and subs["b.ipynb"]["score"] == 0
    for sub in subs.values():
        assert {"path", "score", "max_score", "error", "steps"} <= set(sub)
        assert len(sub["steps"]) == 26
        for s in sub["steps"]:
            assert {
                "step",
                "passed",
                "score",
                "max_score",
                "diagnoses",
                "maxdiff",
                "exact",
                "shape",
                "dtype",
            } <= set(s)
            for d in s["diagnoses"]:
                assert set(d) == {"code", "message"}
    assert not list(tmp_path.glob(".results.json.*"))  # no temporary file left behind


def test_gradescope_results_have_one_test_per_step(tmp_path: Path) -> None:
    nb = make_notebook(tmp_path / "s.ipynb", {"db2": "db2 = dlogits.sum(0, keepdim=True)"})
    out = tmp_path / "results.json"
    r = grade(nb, "--gradescope", out)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["score"] == 25
    assert [t["name"] for t in data["tests"]][:2] == ["dlogprobs", "dprobs"]
    db2 = next(t for t in data["tests"] if t["name"] == "db2")
    assert db2["score"] == 0 and db2["status"] == "failed" and "shape" in db2["output"]


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    r = grade(tmp_path / "nope.ipynb")
    assert r.returncode != 0
    assert "no such file" in r.stderr


def test_resume_grades_only_what_is_missing(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    make_notebook(folder / "a.ipynb")
    out = tmp_path / "results.json"
    assert grade(folder, "--json", out).returncode == 0
    first = json.loads(out.read_text())
    make_notebook(folder / "b.ipynb", {"dh": "dh = dlogits @ W2"})
    r = grade(folder, "--json", out, "--resume")
    assert r.returncode == 0, r.stderr
    assert "1 already graded, 1 to go" in r.stderr
    second = json.loads(out.read_text())
    assert second["seed"] == first["seed"]
    assert second["submissions"][0] == first["submissions"][0]
    assert {Path(s["path"]).name: s["score"] for s in second["submissions"]} == {
        "a.ipynb": 26,
        "b.ipynb": 25,
    }

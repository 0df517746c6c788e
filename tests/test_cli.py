"""``backprop-ninja grade``: tables, JSON, Gradescope, exit codes, resume, shards.

The command runs in-process (its ``main``), as a shell would call it but without starting an
interpreter each time; one smoke test runs it as a real subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.cli import grade as grade_command
from autograder.cli import main
from autograder.cli.grade import batch_table, shard_of, step_table
from autograder.engine.grader import Grader
from autograder.exercises import EXERCISES
from autograder.grading.results import RunResult
from autograder.integrations.gradescope import gradescope_json

from .lecture_notebooks import LectureCase, code, exercise1, exercise2, setup
from .notebooks import SCATTER_BUG_CODE, make_notebook
from .unprivileged import require_unprivileged, run_json, shared_tmp


def grade(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``backprop-ninja grade ARGS`` in-process: (exit status, stdout, stderr)."""
    code = main(["grade", "--jobs", "1", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_grading_one_notebook_prints_a_table_and_exits_zero_whatever_the_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    nb = make_notebook(tmp_path / "student.ipynb", {"dC": SCATTER_BUG_CODE})
    code, out, err = grade(capsys, nb, "--seed", "7")
    assert code == 0, err
    assert "25/26" in out
    assert "scatter-drops-duplicates" in out
    assert "seed 7" in out
    assert max(len(line) for line in out.splitlines()) <= 80  # fits an 80-column terminal


def test_json_and_gradescope_output_have_the_documented_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_notebook(tmp_path / "class" / "a.ipynb")
    make_notebook(tmp_path / "class" / "b.ipynb", default="stub")
    out = tmp_path / "results.json"
    code, _, err = grade(capsys, tmp_path / "class", "--json", out, "--seed", "3")
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["seed"] == 3
    subs = {Path(s["path"]).name: s for s in data["submissions"]}
    assert set(subs) == {"a.ipynb", "b.ipynb"}
    assert subs["a.ipynb"]["score"] == 26 and subs["b.ipynb"]["score"] == 0
    for sub in subs.values():
        assert {"path", "exercise", "score", "max_score", "error", "steps"} <= set(sub)
        assert sub["exercise"] == "backprop_ninja"
        assert len(sub["steps"]) == 26
        for s in sub["steps"]:
            assert {"step", "passed", "score", "max_score", "diagnoses", "maxdiff"} <= set(s)
            assert {"exact", "shape", "dtype", "cases", "where"} <= set(s)
            for d in s["diagnoses"]:
                assert set(d) == {"code", "message"}
    assert not list(tmp_path.glob(".results.json.*"))  # no temporary file left behind


def test_gradescope_results_have_one_test_per_step(grader: Grader, tmp_path: Path) -> None:
    nb = make_notebook(tmp_path / "s.ipynb", {"db2": "db2 = dlogits.sum(0, keepdim=True)"})
    data = gradescope_json(grader.run([nb]).submissions[0])
    assert data["score"] == 25
    assert [t["name"] for t in data["tests"]][:2] == ["dlogprobs", "dprobs"]
    db2 = next(t for t in data["tests"] if t["name"] == "db2")
    assert db2["score"] == 0 and db2["status"] == "failed" and "shape" in db2["output"]
    json.dumps(data, allow_nan=False)


def test_tables_show_every_step_and_sort_the_class_by_score_then_name(
    grader: Grader, tmp_path: Path
) -> None:
    from rich.console import Console

    paths = [
        make_notebook(tmp_path / "b.ipynb"),
        make_notebook(tmp_path / "a.ipynb", {"dh": "dh = dlogits @ W2"}),
        make_notebook(tmp_path / "c.ipynb"),
    ]
    run = grader.run(paths)
    console = Console(width=80, record=True)
    console.print(batch_table(run.submissions))
    console.print(step_table(next(s for s in run.submissions if s.score < 26)))
    text = console.export_text()
    order = [n for n in ("b.ipynb", "c.ipynb", "a.ipynb") if n in text]
    assert [text.index(n) for n in order] == sorted(text.index(n) for n in order)
    assert "dh" in text and max(len(line) for line in text.splitlines()) <= 80


def test_a_missing_path_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = grade(capsys, tmp_path / "nope.ipynb")
    assert code != 0
    assert "no such file" in err


def test_resume_grades_only_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "class"
    make_notebook(folder / "a.ipynb")
    out = tmp_path / "results.json"
    assert grade(capsys, folder, "--json", out, "--seed", "4")[0] == 0
    first = json.loads(out.read_text())
    make_notebook(folder / "b.ipynb", {"dh": "dh = dlogits @ W2"})
    code, _, err = grade(capsys, folder, "--json", out, "--resume")
    assert code == 0, err
    assert "1 already graded, 1 to go" in err
    second = json.loads(out.read_text())
    assert second["seed"] == first["seed"]
    assert second["submissions"][0] == first["submissions"][0]
    assert {Path(s["path"]).name: s["score"] for s in second["submissions"]} == {
        "a.ipynb": 26,
        "b.ipynb": 25,
    }


def test_the_json_file_only_ever_holds_whole_notebooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--resume`` skips every notebook the file names, so a file written between a lecture
    notebook's results (Exercise 1's kept, Exercise 2's not yet) would lose the rest for good
    if the run were killed then: every write holds all of a notebook's results or none."""
    folder = tmp_path / "class"
    folder.mkdir()
    LectureCase("three", "", [*setup(), code(exercise1()), *exercise2()]).write(folder)
    make_notebook(folder / "kit.ipynb")
    monkeypatch.setattr(grade_command, "JSON_FLUSH_SECONDS", -1.0)  # write after every result
    written: list[list[str]] = []
    real = grade_command.write_json

    def spy(path: Path, data: object) -> None:
        if isinstance(data, RunResult):
            written.append([Path(s.path).stem for s in data.submissions])
        real(path, data)

    monkeypatch.setattr(grade_command, "write_json", spy)
    assert grade(capsys, folder, "--json", tmp_path / "r.json", "--seed", "4")[0] == 0
    assert len(written) >= 3  # after each notebook, and at the end
    assert all(names.count("three") in (0, 2) for names in written), written
    assert written[-1].count("three") == 2 and written[-1].count("kit") == 1


def test_shards_are_disjoint_cover_the_class_and_are_the_same_everywhere(tmp_path: Path) -> None:
    paths = [tmp_path / f"{name}.ipynb" for name in "qwertyuiopasdfg"]
    parts = [shard_of(list(reversed(paths)), k, 4) for k in range(1, 5)]
    assert sorted(p for part in parts for p in part) == sorted(paths)
    assert sum(len(part) for part in parts) == len(paths)
    assert parts == [shard_of(paths, k, 4) for k in range(1, 5)]


def test_the_command_runs_as_a_program(tmp_path: Path) -> None:
    """Smoke test: the installed entry, a real interpreter, a real sandbox."""
    nb = make_notebook(tmp_path / "student.ipynb")
    env = dict(os.environ, COLUMNS="120")
    r = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(nb), "--seed", "2", "--jobs", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "26/26" in r.stdout and "seed 2" in r.stdout


def test_a_folder_the_grader_cannot_read_is_a_result_not_a_silence() -> None:
    # Not root (root reads every folder): the notebooks of a folder it cannot list would be
    # left out of the batch without a word; instead the folder itself gets a result.
    require_unprivileged()
    with shared_tmp() as folder:
        for who in ("ada", "closed/bob"):
            (folder / who).mkdir(parents=True)
            make_notebook(folder / who / "backprop_ninja.ipynb").chmod(0o644)
            (folder / who).chmod(0o755)
        closed = folder / "closed"
        if os.geteuid() == 0:
            os.chown(closed, 0, 0)  # the child runs as nobody
        closed.chmod(0)
        try:
            found = run_json(
                "import json\nfrom pathlib import Path\n"
                "from autograder.grading.submission import SubmissionError, find_notebooks\n"
                "from autograder.grading.submission import read_notebook\n"
                "out = []\n"
                f"for p in find_notebooks([Path({str(folder)!r})]):\n"
                "    try:\n"
                "        read_notebook(p)\n"
                "        out.append([str(p), None])\n"
                "    except SubmissionError as e:\n"
                "        out.append([str(p), str(e)])\n"
                "print(json.dumps(out))\n"
            )
        finally:
            closed.chmod(0o755)
    assert found == [
        [str(folder / "ada" / "backprop_ninja.ipynb"), None],
        [
            str(closed),
            "cannot read this folder: Permission denied; the notebooks in it were not graded "
            "(make it readable by the grader)",
        ],
    ]


def test_an_assignment_grades_every_notebook_as_its_exercise_and_refuses_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = EXERCISES["cross_entropy_backward"]
    folder = tmp_path / "class"
    make_notebook(folder / "mine.ipynb", exercise=ex)
    make_notebook(folder / "other.ipynb")  # Exercise 1's notebook, handed in by mistake
    LectureCase("lecture", "", [*setup(), code(exercise1()), *exercise2()]).write(folder)
    out = tmp_path / "results.json"
    status, _, err = grade(capsys, folder, "--assignment", ex.id, "--json", out, "--seed", "4")
    assert status == 0, err
    subs = {Path(s["path"]).stem: s for s in json.loads(out.read_text())["submissions"]}
    assert set(subs) == {"mine", "other", "lecture"}  # one result each: the lecture's Ex. 2
    assert {s["exercise"] for s in subs.values()} == {ex.id}
    assert subs["mine"]["score"] == subs["lecture"]["score"] == ex.total_points
    assert subs["other"]["score"] == 0 and subs["other"]["max_score"] == ex.total_points
    assert subs["other"]["error"].startswith("This notebook is Becoming a backprop ninja")
    assert f"submit your {ex.id}.ipynb" in subs["other"]["error"]
    with pytest.raises(SystemExit) as refused:
        grade(capsys, folder, "--assignment", "nonsense")
    assert refused.value.code == 2
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err

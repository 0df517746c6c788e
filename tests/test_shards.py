"""A class graded in parts on several machines (``grade --shard K/N``) and joined with
``backprop-ninja merge`` is the run one machine would have made; parts that are not one grading
are refused with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autograder import __version__
from autograder.cli import main
from autograder.exercises import EXERCISES
from autograder.grading.results import RunResult, SubmissionResult, write_json

from .notebooks import SCATTER_BUG_CODE, make_notebook


def _class(folder: Path) -> None:
    """Six submissions of two exercises: right, wrong, untouched, and a file that is no notebook."""
    make_notebook(folder / "ada" / "backprop_ninja.ipynb")
    make_notebook(folder / "bob" / "backprop_ninja.ipynb", {"dC": SCATTER_BUG_CODE})
    make_notebook(folder / "cy" / "backprop_ninja.ipynb", default="stub")
    make_notebook(
        folder / "dee" / "cross_entropy_backward.ipynb",
        {"dlogits": "dlogits = F.softmax(logits, 1)"},
        exercise=EXERCISES["cross_entropy_backward"],
    )
    make_notebook(
        folder / "eve" / "cross_entropy_backward.ipynb",
        exercise=EXERCISES["cross_entropy_backward"],
    )
    (folder / "fay").mkdir()
    (folder / "fay" / "backprop_ninja.ipynb").write_text("not a notebook")


def _without_timings(data: dict[str, Any]) -> dict[str, Any]:
    """A results file less each answer's wall time, the one field two runs never share."""
    for sub in data["submissions"]:
        for step in sub["steps"]:
            step.pop("seconds")
    return data


def test_a_class_graded_in_three_parts_and_merged_is_the_unsharded_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "class"
    _class(folder)
    common = ["--seed", "11", "--jobs", "1", "--quiet"]
    parts = [tmp_path / f"part-{k}.json" for k in (1, 2, 3)]
    for k, part in enumerate(parts, start=1):
        assert main(["grade", str(folder), "--shard", f"{k}/3", "--json", str(part), *common]) == 0
    whole = tmp_path / "whole.json"
    assert main(["grade", str(folder), "--json", str(whole), *common]) == 0
    merged = tmp_path / "merged.json"
    assert main(["merge", *map(str, parts), "-o", str(merged)]) == 0
    assert "merged 3 part(s): 6 submissions, seed 11" in capsys.readouterr().out

    part_paths = [[s["path"] for s in json.loads(p.read_text())["submissions"]] for p in parts]
    assert [len(p) for p in part_paths] == [2, 2, 2]
    assert [json.loads(p.read_text())["shard"] for p in parts] == ["1/3", "2/3", "3/3"]
    assert len({path for p in part_paths for path in p}) == 6
    assert _without_timings(json.loads(merged.read_text())) == _without_timings(
        json.loads(whole.read_text())
    )


def _part(
    seed: int = 5, shard: str | None = None, paths: tuple[str, ...] = ("a.ipynb",)
) -> RunResult:
    subs = [SubmissionResult(path=p, score=1.0, max_score=26.0, error=None) for p in paths]
    return RunResult(seed=seed, submissions=subs, version=__version__, shard=shard)


def _merge(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    *runs: RunResult,
    flags: tuple[str, ...] = (),
) -> tuple[int, str]:
    files = []
    for i, run in enumerate(runs):
        files.append(tmp_path / f"p{i}.json")
        write_json(files[-1], run.to_json())
    code = main(["merge", *map(str, files), "-o", str(tmp_path / "out.json"), *flags])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("runs", "says"),
    [
        ((_part(5), _part(6, paths=("b.ipynb",))), "differ in seed"),
        ((_part(5, "1/2"), _part(5, "2/2", ("a.ipynb", "b.ipynb"))), "in two parts: a.ipynb ("),
        ((_part(5, "1/2"), _part(5, "1/2", ("b.ipynb",))), "part 1/2 is given more than once"),
        ((_part(5, "1/2"), _part(5, "2/3", ("b.ipynb",))), "different splits"),
        ((_part(5, "1/3"), _part(5, "3/3", ("b.ipynb",))), "part 2/3 missing"),
    ],
    ids=["seeds", "overlap", "same-part-twice", "splits", "missing-part"],
)
def test_parts_that_are_not_one_grading_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runs: tuple[RunResult, ...], says: str
) -> None:
    code, err = _merge(tmp_path, capsys, *runs)
    assert code == 1 and says in err
    assert not (tmp_path / "out.json").exists()


def test_one_file_given_twice_or_one_run_under_two_names_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = tmp_path / "whole.json"  # an unsharded run: no label tells its copies apart
    write_json(whole, _part(5, paths=("a.ipynb", "b.ipynb")).to_json())
    copy = tmp_path / "copy.json"
    copy.write_bytes(whole.read_bytes())
    for files, says in (((whole, whole), "given more than once"), ((whole, copy), "in two parts")):
        code = main(["merge", *map(str, files), "-o", str(tmp_path / "out.json")])
        assert code == 1 and says in capsys.readouterr().err
        assert not (tmp_path / "out.json").exists()


def test_parts_of_another_kit_version_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _part(5, paths=("b.ipynb",))
    old.version = "0.0.1"
    code, err = _merge(tmp_path, capsys, _part(5), old)
    assert code == 1 and "differ in kit version" in err and "0.0.1" in err


def test_a_missing_part_is_accepted_when_asked_and_an_unreadable_one_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _merge(
        tmp_path, capsys, _part(5, "3/3", ("c.ipynb",)), _part(5, "1/3"), flags=("--partial",)
    )
    assert code == 0
    merged = json.loads((tmp_path / "out.json").read_text())
    assert [s["path"] for s in merged["submissions"]] == ["a.ipynb", "c.ipynb"]
    assert merged["shard"] is None and merged["seed"] == 5

    (tmp_path / "junk.json").write_text("{not json")
    code = main(["merge", str(tmp_path / "junk.json"), "-o", str(tmp_path / "x.json")])
    assert code == 1 and "cannot read" in capsys.readouterr().err

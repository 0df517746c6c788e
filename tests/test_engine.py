"""The engine grades each step in isolation, under every hidden case, reproducibly, and grades each
distinct answer once."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

from autograder.engine.grader import Grader, normalise, translate_line
from autograder.exercises import DEFAULT
from autograder.grading.results import dumps
from autograder.grading.submission import (
    MAX_ANSWER_CHARS,
    MAX_OLD_CELLS,
    SubmissionError,
    find_notebooks,
    parse_notebook,
)

from .conftest import LIMITS
from .notebooks import SCATTER_BUG_CODE as SCATTER_BUG
from .notebooks import make_notebook

EX = DEFAULT


def test_the_model_answer_passes_every_step_under_every_case(grader: Grader) -> None:
    results = grader.grade_codes([(EX, s, s.answer) for s in EX.steps])
    for s, r in zip(EX.steps, results, strict=True):
        assert r.passed, (s.name, r.diagnoses)
        assert [c.passed for c in r.cases] == [True] * len(EX.cases)
        assert r.diagnoses == []
        assert r.shape == r.expected_shape


def test_released_notebook_scores_zero_with_not_implemented(grader: Grader, tmp_path: Path) -> None:
    sub = grader.run([make_notebook(tmp_path / "released.ipynb", default="stub")]).submissions[0]
    assert sub.score == 0 and sub.max_score == EX.total_points == 26
    assert sub.error is None and sub.exercise == EX.id
    assert {d.code for s in sub.steps for d in s.diagnoses} == {"not-implemented"}


def test_one_wrong_step_costs_only_that_step(grader: Grader, tmp_path: Path) -> None:
    nb = make_notebook(
        tmp_path / "one.ipynb", {"dcounts_sum": "dcounts_sum = counts_sum**-2 * dcounts_sum_inv"}
    )
    sub = grader.run([nb]).submissions[0]
    assert sub.score == 25
    assert [s.step for s in sub.steps if not s.passed] == ["dcounts_sum"]


def test_line_magics_beside_an_answer_cost_nothing_and_a_cell_magic_stays(
    grader: Grader, tmp_path: Path
) -> None:
    nb = make_notebook(
        tmp_path / "magics.ipynb",
        {
            "dh": "%matplotlib inline\n!nvidia-smi\ndh = dlogits @ W2.T",
            "dW2": "%%time\ndW2 = h.T @ dlogits",  # the whole cell is the magic's: not Python
        },
    )
    sub = grader.run([nb]).submissions[0]
    assert [s.step for s in sub.steps if not s.passed] == ["dW2"]
    assert sub.step("dW2").diagnoses[0].code == "error"


def test_scatter_with_fancy_index_is_flagged_on_repeated_rows(grader: Grader) -> None:
    r = grader.grade_code(EX, EX.step("dC"), SCATTER_BUG)
    assert not r.passed
    assert [d.code for d in r.diagnoses] == ["scatter-drops-duplicates"]
    assert r.rows is not None and r.rows.wrong
    assert set(r.rows.wrong) <= set(r.rows.repeated)
    assert all(r.rows.uses[row] > 1 for row in r.rows.wrong)
    assert "dC[Xb]" not in r.diagnoses[0].message  # the fix in words, never in code


def test_true_zero_gradients_are_checked_with_random_upstream(grader: Grader) -> None:
    for name, code in [
        ("dlogit_maxes", "dlogit_maxes = dnorm_logits.sum(1, keepdim=True)"),
        ("db1", "db1 = torch.zeros_like(b1)"),
    ]:
        r = grader.grade_code(EX, EX.step(name), code)
        assert not r.passed, name
        assert r.cases[0].passed  # right at the true gradient, which is ~0 ...
        assert not all(c.passed for c in r.cases[1:])  # ... and caught by the others


def test_autograd_is_reported_from_the_source_and_at_run_time(grader: Grader) -> None:
    pasted = grader.grade_code(EX, EX.step("dC"), "dC = C.grad")
    assert "uses-autograd" in [d.code for d in pasted.diagnoses]
    hidden = (
        "ag = getattr(torch, 'auto' + 'grad')\n"
        "x = probs.detach().clone(); x.requires_grad = True\n"
        "y = x.log()\n"
        "dprobs, = ag.grad(y, x, dlogprobs)"
    )
    r = grader.grade_code(EX, EX.step("dprobs"), hidden)
    assert not r.passed
    assert "uses-autograd" in [d.code for d in r.diagnoses]


def test_a_run_is_reproducible_from_its_seed(tmp_path: Path) -> None:
    nb = make_notebook(
        tmp_path / "wrong.ipynb", {"dbndiff2": "dbndiff2 = (1.0/n)*torch.ones_like(bndiff2)*dbnvar"}
    )

    def values(seed: int) -> list:
        g = Grader(seed=seed, limits=LIMITS, jobs=1)
        try:
            run = g.run([nb]).to_json()
        finally:
            g.close()
        assert run["seed"] == seed
        return [
            (s["step"], s["passed"], [x["maxdiff"] for x in s["cases"]])
            for s in run["submissions"][0]["steps"]
        ]

    first = values(99)
    assert first == values(99)
    assert first != values(100)


def test_missing_renamed_and_duplicated_cells_cost_their_steps_only(
    grader: Grader, tmp_path: Path
) -> None:
    path = make_notebook(tmp_path / "cells.ipynb")
    nb = nbformat.read(str(path), as_version=4)
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    answers[0].metadata["nbgrader"]["grade_id"] = "my_dlogprobs"  # renamed
    answers[2].metadata["nbgrader"]["grade_id"] = "dcounts"  # duplicates dcounts
    nb.cells.remove(answers[1])  # deleted dprobs
    nbformat.write(nb, str(path))
    sub = grader.run([path]).submissions[0]
    failed = sorted(s.step for s in sub.steps if not s.passed)
    assert failed == sorted(["dlogprobs", "dprobs", "dcounts_sum_inv", "dcounts"])
    assert sub.score == 22
    assert sub.error and "dlogprobs" in sub.error and "dcounts" in sub.error


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json at all",
        b"\x00\x01\x02\xff" * 100,
        b'{"cells": 3}',
        b"[1, 2, 3]",
        json.dumps({"nbformat": 4}).encode(),
        b'{"cells": [1, 2]}',
        b"[" * 100_000,
    ],
)
def test_unreadable_files_get_a_clear_error_and_the_batch_goes_on(
    grader: Grader, tmp_path: Path, content: bytes
) -> None:
    bad = tmp_path / "bad.ipynb"
    bad.write_bytes(content)
    good = make_notebook(tmp_path / "good.ipynb")
    subs = {Path(s.path).name: s for s in grader.run([bad, good]).submissions}
    assert subs["bad.ipynb"].score == 0 and subs["bad.ipynb"].error
    assert subs["good.ipynb"].score == 26


def test_links_and_special_files_in_a_class_folder_get_a_reason_and_are_never_followed(
    grader: Grader, tmp_path: Path
) -> None:
    """The grader reads with its own rights: a link a student leaves in the class folder (to a
    full-marks notebook outside it, or to nothing) is never read through, a FIFO is not waited
    on, and a linked folder is not walked; each file still gets its result."""
    full_marks = make_notebook(tmp_path / "solution.ipynb")
    folder = tmp_path / "class"
    for student in ("alice", "bob", "carl", "dan"):
        (folder / student).mkdir(parents=True)
    make_notebook(folder / "alice" / "hw.ipynb")
    (folder / "bob" / "hw.ipynb").symlink_to(full_marks)
    (folder / "carl" / "hw.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    os.mkfifo(folder / "dan" / "hw.ipynb")
    (folder / "eve").symlink_to(folder / "alice", target_is_directory=True)
    paths = find_notebooks([folder])
    assert [p.parent.name for p in paths] == ["alice", "bob", "carl", "dan"]
    subs = {Path(s.path).parent.name: s for s in grader.run(paths).submissions}
    assert subs["alice"].score == 26 and not subs["alice"].error
    for student in ("bob", "carl"):
        assert subs[student].score == 0 and subs[student].steps == []
        assert "symbolic link" in (subs[student].error or ""), student
    assert subs["dan"].score == 0 and "not a regular file" in (subs["dan"].error or "")


def test_an_answer_longer_than_any_answered_step_is_not_graded_and_says_why(
    grader: Grader, tmp_path: Path
) -> None:
    step = EX.step("dh")
    long = step.answer + "\n# " + "x" * (MAX_ANSWER_CHARS - len(step.answer) - 2)  # one over
    assert len(long) == MAX_ANSWER_CHARS + 1
    sub = grader.run([make_notebook(tmp_path / "long.ipynb", {"dh": long})]).submissions[0]
    assert not sub.step("dh").passed and sub.score == 25
    assert f"at most {MAX_ANSWER_CHARS:,}" in (sub.error or "")
    sub = grader.run([make_notebook(tmp_path / "ok.ipynb", {"dh": long[:-1]})]).submissions[0]
    assert sub.score == 26  # a long comment under the limit is graded as usual


def test_an_old_format_notebook_is_converted_unless_it_has_more_cells_than_any_answer(
    grader: Grader,
) -> None:
    def v3(cells: int) -> str:
        cell = {"cell_type": "code", "input": "x = 1", "language": "python", "outputs": []}
        sheet = {"cells": [cell] * cells, "metadata": {}}
        return json.dumps(
            {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [sheet]}
        )

    assert [c["source"] for c in parse_notebook(v3(3))["cells"]] == ["x = 1"] * 3
    with pytest.raises(SubmissionError, match="old format"):  # refused before nbformat reads it
        parse_notebook(v3(MAX_OLD_CELLS + 1))


def test_a_nan_answer_is_strict_json_everywhere(grader: Grader, tmp_path: Path) -> None:
    nb = make_notebook(tmp_path / "nan.ipynb", {"dh": "dh = (dlogits @ W2.T) * float('nan')"})
    run = grader.run([nb])
    text = dumps(run.to_json())
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))
    step = run.submissions[0].step("dh")
    assert not step.passed and step.maxdiff == math.inf  # not comparable: null in the JSON
    assert json.loads(text)["submissions"][0]["steps"][8]["maxdiff"] is None


# -- each distinct answer once ---------------------------------------------------------------


def test_normalising_ignores_comments_spacing_and_quotes_but_no_token() -> None:
    a = "x = torch.zeros_like(h)  # start\n\n\ny = x+1"
    b = 'x  =  torch.zeros_like( h )\ny = x + 1  # "a comment"'
    assert normalise(a) == normalise(b)
    assert normalise("s = 'a'") == normalise('s = "a"')
    assert normalise("y = x + 1") != normalise("y = x - 1")
    assert normalise("y = x + 1") != normalise("y = x + 2")
    assert normalise("y = x +") != normalise("y = x -")  # no syntax tree: the text counts


def test_a_line_number_is_translated_between_answers_with_one_syntax_tree() -> None:
    first = "x = 1\ny = x.nope()"
    other = "# a comment\n\nx = 1\n\ny = x.nope()  # here"
    assert translate_line(first, other, 2) == 5


def test_identical_answers_get_identical_results_and_any_token_counts(tmp_path: Path) -> None:
    g = Grader(seed=11, limits=LIMITS)
    try:
        slip = "dh = dlogits @ W2.T\ndh = dh.nope()"
        spaced = "# my answer\n\ndh  =  dlogits @ W2.T\n\ndh = dh.nope()"
        paths = [
            make_notebook(tmp_path / f"s{i}.ipynb", {"dh": code})
            for i, code in enumerate([slip, slip, spaced, "dh = dlogits @ W2.T"])
        ]
        subs = {Path(s.path).stem: s for s in g.run(paths).submissions}
        same = [subs[k].step("dh") for k in ("s0", "s1")]
        assert same[0] == same[1]
        assert "line 2" in same[0].diagnoses[0].message
        assert "line 5" in subs["s2"].step("dh").diagnoses[0].message  # its own cell's line
        assert subs["s3"].step("dh").passed
        distinct = {key for key in g._runs if key[1] == "dh"}
        assert len(distinct) == 2  # the slip (three spellings) and the right answer
    finally:
        g.close()


def test_a_cache_makes_the_second_run_run_nothing_and_a_foreign_entry_is_ignored(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    nb = make_notebook(tmp_path / "sub.ipynb", {"dh": "dh = dlogits @ W2.T * 2"})
    g = Grader(seed=5, limits=LIMITS, cache=cache)
    try:
        first = g.run([nb]).submissions[0]
    finally:
        g.close()
    entries = sorted(cache.glob("*.bin"))
    assert len(entries) == 26
    entries[0].write_bytes(b"garbage")  # a corrupt entry is ignored and regraded
    g = Grader(seed=5, limits=LIMITS, cache=cache)
    try:
        second = g.run([nb]).submissions[0]
        assert g.executed == 1  # only the answer whose entry was corrupt
    finally:
        g.close()
    assert [s.passed for s in first.steps] == [s.passed for s in second.steps]
    assert [d.code for d in second.step("dh").diagnoses] == ["wrong-scale"]


def test_a_large_answer_is_judged_then_forgotten_and_a_small_one_kept(grader: Grader) -> None:
    """An answer's tensors are kept for later submissions with the same answer only when small
    (every true answer is); a hostile class of large ones cannot pile up in the grader."""
    step = EX.step("dprobs")
    large = "dprobs = torch.zeros(2**16)"  # 256 KiB a case: over KEEP_BYTES in all
    small = "dprobs = torch.zeros(3)"
    for code, runs in ((large, 2), (small, 1)):
        before = grader.executed
        first, second = (grader.grade_code(EX, step, code) for _ in range(2))
        assert grader.executed - before == runs, code
        assert replace(first, seconds=0) == replace(second, seconds=0)
        assert not first.passed
        assert first.diagnoses[0].code == "shape-mismatch"

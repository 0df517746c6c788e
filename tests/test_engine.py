"""The engine grades each step in isolation, under every hidden case, reproducibly."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.cases import build_cases
from autograder.catalog import FORWARD, STEPS, step, total_points
from autograder.engine import Grader
from autograder.model import OPS, lecture_graph, true_gradients
from autograder.solutions import SOLUTIONS

from .notebooks import SCATTER_BUG_CODE as SCATTER_BUG
from .notebooks import make_notebook


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(seed=1234)


def test_catalog_lines_are_the_model_ops() -> None:
    graph = lecture_graph()
    ns = {k: graph[k] for k in ("n", "Xb", "Yb", "C", "W1", "b1", "W2", "b2", "bngain", "bnbias")}
    ns["torch"] = torch
    for var, line in FORWARD:
        exec(line, ns)  # trusted: the kit's own catalog
        assert torch.equal(ns[var], OPS[var](graph)), var


def test_catalog_consumers_are_the_lines_that_read_each_variable() -> None:
    import re

    for s in STEPS:
        readers = tuple(
            var for var, line in FORWARD if re.search(rf"\b{s.var}\b", line.split("=", 1)[1])
        )
        assert set(readers) == set(s.consumers), s.name


def test_references_equal_autograd_on_the_lecture_case() -> None:
    lecture = build_cases(0)[0]
    true = true_gradients(lecture_graph())
    for s in STEPS:
        ref = lecture.reference(s)
        assert ref.shape == true[s.name].shape
        assert torch.allclose(ref, true[s.name].double(), atol=1e-6), s.name


def test_hidden_sizes_are_distinct_and_not_powers_of_two() -> None:
    for case in build_cases(0)[2:]:
        sizes = list(case.config.as_dict().values())
        assert len(set(sizes)) == len(sizes)
        assert all(v & (v - 1) for v in sizes), case.name


def test_the_model_solution_passes_every_step_under_every_case(grader: Grader) -> None:
    for s in STEPS:
        r = grader.grade_code(s, SOLUTIONS[s.name])
        assert r.passed, (s.name, r.diagnoses)
        assert [c.passed for c in r.cases] == [True] * len(grader.cases)
        assert r.diagnoses == []
        assert r.shape == r.expected_shape


def test_released_notebook_scores_zero_with_not_implemented(grader: Grader, tmp_path: Path) -> None:
    sub = grader.run([make_notebook(tmp_path / "released.ipynb", default="stub")]).submissions[0]
    assert sub.score == 0 and sub.max_score == total_points() == 26
    assert sub.error is None
    assert {d.code for s in sub.steps for d in s.diagnoses} == {"not-implemented"}


def test_one_wrong_step_costs_only_that_step(grader: Grader, tmp_path: Path) -> None:
    nb = make_notebook(
        tmp_path / "one.ipynb", {"dcounts_sum": "dcounts_sum = counts_sum**-2 * dcounts_sum_inv"}
    )
    sub = grader.run([nb]).submissions[0]
    assert sub.score == 25
    assert [s.step for s in sub.steps if not s.passed] == ["dcounts_sum"]


def test_scatter_with_fancy_index_is_flagged_on_repeated_rows(grader: Grader) -> None:
    r = grader.grade_code(step("dC"), SCATTER_BUG)
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
        r = grader.grade_code(step(name), code)
        assert not r.passed, name
        assert r.cases[0].passed  # right at the true gradient, which is ~0 ...
        assert not all(c.passed for c in r.cases[1:])  # ... and caught by the others


def test_autograd_is_reported_from_the_source_and_at_run_time(grader: Grader) -> None:
    pasted = grader.grade_code(step("dC"), "dC = C.grad")
    assert "uses-autograd" in [d.code for d in pasted.diagnoses]
    hidden = (
        "ag = getattr(torch, 'auto' + 'grad')\n"
        "x = probs.detach().clone(); x.requires_grad = True\n"
        "y = x.log()\n"
        "dprobs, = ag.grad(y, x, dlogprobs)"
    )
    r = grader.grade_code(step("dprobs"), hidden)
    assert not r.passed
    assert "uses-autograd" in [d.code for d in r.diagnoses]


def test_a_run_is_reproducible_from_its_seed(tmp_path: Path) -> None:
    nb = make_notebook(
        tmp_path / "wrong.ipynb", {"dbndiff2": "dbndiff2 = (1.0/n)*torch.ones_like(bndiff2)*dbnvar"}
    )
    a = Grader(seed=99).run([nb]).to_json()
    b = Grader(seed=99).run([nb]).to_json()
    c = Grader(seed=100).run([nb]).to_json()

    def values(run: dict) -> list:
        return [
            (s["step"], s["passed"], [x["maxdiff"] for x in s["cases"]])
            for s in run["submissions"][0]["steps"]
        ]

    assert a["seed"] == 99 and values(a) == values(b)
    assert values(a) != values(c)


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

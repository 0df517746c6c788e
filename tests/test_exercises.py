"""The exercise value: its forward lines are the model, its steps' consumers are the lines that read
each variable, its references are autograd's gradients, and its configurations are as designed."""

from __future__ import annotations

import pytest
import torch

from autograder.core.cases import build
from autograder.core.model import lecture_graph, true_gradients
from autograder.core.portable import autograd_training, evaluate, probe_update, split_training
from autograder.exercises import DEFAULT, EXERCISES, ROOT
from autograder.exercises.definition import Exercise, Line


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_every_forward_line_evaluates_to_its_declared_shape(ex: Exercise) -> None:
    graph = lecture_graph(ex)
    for line in ex.forward:
        value = evaluate(line.expression, graph)
        assert torch.equal(value, graph[line.var]), line.var
        assert tuple(value.shape) == ex.concrete_shape(line.var, ex.cases[0].config), line.var
    for name in ex.parameters:
        assert tuple(graph[name].shape) == ex.concrete_shape(name, ex.cases[0].config), name


def test_exercise_1_consumers_are_the_lines_that_read_each_variable() -> None:
    for s in DEFAULT.steps:
        assert set(DEFAULT.readers(s.var)) == set(s.consumers), s.name


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_references_equal_autograd_on_the_lecture_case(ex: Exercise) -> None:
    lecture = build(ex, 0)[0]
    true = true_gradients(ex, lecture_graph(ex))
    for s in ex.steps:
        if s.kind == "training":
            continue
        ref = lecture.reference(s)
        assert ref.shape == true[s.name].shape, s.name
        assert torch.allclose(ref, true[s.name].double(), atol=1e-6), s.name


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_hidden_sizes_are_distinct_and_not_powers_of_two(ex: Exercise) -> None:
    for spec in (*ex.cases, *ex.public):
        if spec.lecture_sizes:
            continue
        sizes = list(spec.config.as_dict().values())
        assert len(set(sizes)) == len(sizes), spec.name
        assert all(v & (v - 1) for v in sizes), spec.name
    public = {c.config for c in ex.public}
    assert not public & {c.config for c in ex.cases if not c.lecture_sizes}


def test_the_first_case_is_the_lectures_with_true_upstream_gradients() -> None:
    for ex in EXERCISES.values():
        first = ex.cases[0]
        assert first.upstream == "true" and first.batch == "lecture" and first.lecture_sizes


def test_the_repeats_case_uses_rows_many_times_and_once() -> None:
    [repeats] = [c for c in build(DEFAULT, 7) if c.spec.batch == "repeats"]
    uses = repeats.row_uses(DEFAULT.step("dC"))
    assert int(uses.max()) == 40 and int((uses == 1).sum()) == 19


def test_the_near_constant_case_has_features_of_variance_near_the_epsilon() -> None:
    [case] = [c for c in build(DEFAULT, 7) if c.spec.shift == "near-constant"]
    assert 1e-5 < float(case.graph["bnvar"].mean()) < 1e-3


def test_a_line_must_assign_its_own_variable() -> None:
    with pytest.raises(ValueError, match="must assign"):
        Line("h", "g = torch.tanh(hpreact)", ("n", "n_hidden"))


def test_a_step_names_an_existing_variable_and_consumers() -> None:
    bad = DEFAULT.steps[0].__class__(
        name="dnothing", var="nothing", consumers=("loss",), text="", answer=""
    )
    with pytest.raises(ValueError, match="unknown"):
        Exercise(
            id="broken",
            forward=DEFAULT.forward,
            steps=(bad,),
            cases=DEFAULT.cases,
            text=DEFAULT.text,
            leaf_shapes=DEFAULT.leaf_shapes,
        )


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_the_named_parts_of_a_fused_reference_add_up_to_it(ex: Exercise) -> None:
    for case in build(ex, 3):
        for step in (s for s in ex.steps if s.terms):
            total = sum(t for _, t in case.terms(step))
            ref = case.reference(step)
            assert float((total - ref).abs().max()) <= 1e-6 * float(ref.abs().max()), step.name


def test_a_training_reference_is_the_loss_of_each_batch_and_training_changes_it() -> None:
    ex = EXERCISES["manual_training"]
    [update] = [s for s in ex.steps if s.kind == "training"]
    for case in build(ex, 3):
        g = case.graph
        params = {k: g[k] for k in ex.parameters}
        split = split_training(case.reference(update), params)
        still_split = split_training(
            autograd_training(ex.pass_lines, params, g["Xbs"], g["Ybs"], 0.0), params
        )
        assert split is not None and still_split is not None
        (losses, probe), (still, unmoved) = split, still_split
        assert losses.shape == still.shape == (g["Xbs"].shape[0] + 1,)  # and after the last
        assert float(losses[0]) == pytest.approx(float(still[0]))  # the same start ...
        assert float(still[-1]) == pytest.approx(float(still[0]))  # (the last is on batch 0)
        assert float((losses - still).abs().max()) > 1e-2, case.name  # ... then it learns
        before, steps = probe_update(params, g["lr"])
        for k, v in params.items():  # the probe: one update of known values, each parameter
            assert probe[k].shape == unmoved[k].shape == v.shape
            assert not unmoved[k].any()  # lr 0: nothing moves
            assert torch.equal(probe[k], steps[k])
            assert 0.5 < float(steps[k].abs().max()) < 5, k
            assert float(before[k].abs().max()) > 100 * float(steps[k].abs().max()) / 5, k


def test_the_root_is_the_loss_and_every_exercise_ends_there() -> None:
    for ex in EXERCISES.values():
        assert ex.forward[-1].var == ROOT

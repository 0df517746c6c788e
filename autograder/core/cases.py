"""The hidden configurations a step is graded under, and their reference gradients.

A *case* is one forward graph (float32, as the student's code sees it) plus one upstream gradient
per variable, built from one of the exercise's :class:`~autograder.exercises.definition.CaseSpec`.
A step's code runs once per case with only that case's tensors, and its answer is compared with
the case's float64 reference (:mod:`autograder.core.references`). The references exist only in
the grader: the sandbox receives a case's *inputs* (:meth:`Case.inputs`), never a reference.

Every random draw comes from a generator seeded from the run's seed and the case's position, so
``build(ex, seed)`` gives the same cases on every machine and ``--seed`` replays a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..exercises.definition import ROOT, CaseSpec, Config, Exercise, Step
from ..exercises.mlp import REPEAT_USES
from .model import Tensors, forward, lecture_params, load_lecture_batch, true_gradients
from .portable import (
    LEARNING_RATE,
    TRAINING_STEPS,
    autograd_training,
    evaluate,
    init_params,
    repeats_batch,
)
from .references import branches, to_float64

NEAR_CONSTANT_SCALE = 6e-3
"""Factor on W1 in the ``near-constant`` shift: the features' batch variance falls from ~2.8 to
~1e-4, the same order as the batch norm's 1e-5."""

LARGE_LOGITS_SCALE = 400.0
"""Factor on W2 and b2 in the ``large-logits`` shift: logits in the hundreds, where ``exp``
overflows float32 unless the row maximum is subtracted first."""


@dataclass
class Case:
    """One hidden configuration: its graph, its upstream gradients, its references per step."""

    spec: CaseSpec
    exercise: Exercise
    graph: Tensors  # float32 forward graph, nothing requires grad
    upstream: dict[str, torch.Tensor]  # gradient name -> float32 tensor, for every variable
    exact: dict[str, torch.Tensor] = field(default_factory=dict)  # autograd's float32 gradients
    graph64: Tensors = field(init=False)
    # Caches, filled in the grader only, on first use.
    _branches: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict, init=False)
    _references: dict[str, torch.Tensor] = field(default_factory=dict, init=False)
    _scales: dict[str, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.graph64 = to_float64(self.graph)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def config(self) -> Config:
        return self.spec.config

    @property
    def true_upstream(self) -> bool:
        return self.spec.upstream == "true"

    def branches(self, step: Step) -> dict[str, torch.Tensor]:
        """The float64 chain-rule terms of ``step`` for this case, one per consumer (cached)."""
        if step.name not in self._branches:
            self._branches[step.name] = branches(self.exercise, step, self.graph64, self.upstream)
        return self._branches[step.name]

    def reference(self, step: Step) -> torch.Tensor:
        """The float64 reference of ``step`` for this case (cached): its gradient, or for a
        training step the losses of training with autograd's gradients."""
        if step.name not in self._references:
            if step.kind == "training":
                params = {k: self.graph[k] for k in self.exercise.parameters}
                g = self.graph
                ref = autograd_training(
                    self.exercise.pass_lines, params, g["Xbs"], g["Ybs"], g["lr"]
                )
            else:
                terms = list(self.branches(step).values())
                ref = torch.stack(terms).sum(0) if len(terms) > 1 else terms[0]
            self._references[step.name] = ref
        return self._references[step.name]

    def terms(self, step: Step) -> list[tuple[str, torch.Tensor]]:
        """A fused formula's named parts of the reference, in float64 (``Step.terms``)."""
        namespace = {**self.graph64, **{k: v.double() for k, v in self.upstream.items()}}
        shape = self.reference(step).shape
        return [
            (t.label, torch.broadcast_to(evaluate(t.expression, namespace), shape))
            for t in step.terms
        ]

    def inputs(self, step: Step) -> dict[str, Any]:
        """What a step's code may read: sizes, data, parameters, forward tensors and the upstream
        gradients of the step's consumers (not the gradients of any other step)."""
        names = {k: v for k, v in self.graph.items() if k != ROOT}
        for up in step.upstream:
            names[up] = self.upstream[up]
        return names

    def scale(self, step: Step) -> float:
        """The magnitude tolerances are relative to: the larger of the reference's and the
        upstream gradients' largest absolute values (true gradients of logit_maxes and b1 are ~0,
        so the reference alone would leave only float32 rounding to compare). Cached: it is
        asked for every case of every step of every submission."""
        if step.name not in self._scales:
            mags = [float(self.reference(step).abs().max())]
            mags += [float(self.upstream[u].abs().max()) for u in step.upstream]
            self._scales[step.name] = max(*mags, 1e-12)
        return self._scales[step.name]

    def row_uses(self, step: Step) -> torch.Tensor:
        """For a scatter step: how often the batch uses each row of the table, ``(rows,)``."""
        if step.scatter is None:
            raise ValueError(f"{step.name} is not a scatter into a table")
        rows = self.graph[step.var].shape[0]
        return torch.bincount(self.graph[step.scatter.index].flatten(), minlength=rows)


def random_upstream(ex: Exercise, graph: Tensors, g: torch.Generator) -> dict[str, torch.Tensor]:
    """An independent standard-normal gradient for every float tensor of the graph."""
    return {"d" + k: torch.randn(graph[k].shape, generator=g) for k in ex.variables}


def shifted(params: Tensors, shift: str) -> Tensors:
    """The parameters changed by a spec's ``shift`` (see :class:`CaseSpec`)."""
    if shift == "near-constant":
        return {**params, "W1": params["W1"] * NEAR_CONSTANT_SCALE}
    if shift == "large-logits":
        return {
            **params,
            "W2": params["W2"] * LARGE_LOGITS_SCALE,
            "b2": params["b2"] * LARGE_LOGITS_SCALE,
        }
    return params


def build_case(ex: Exercise, spec: CaseSpec, g: torch.Generator) -> Case:
    """One case from its recipe, every random draw from ``g``."""
    if spec.batch == "lecture":
        Xb, Yb, _ = load_lecture_batch()
        params = lecture_params(spec.config)
    else:
        params = init_params(spec.config, g)
        cfg = spec.config
        if spec.batch == "repeats":
            uses = spec.uses or REPEAT_USES
            Xb = repeats_batch(cfg.vocab_size, cfg.batch_size, cfg.block_size, uses, g)
        else:
            Xb = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.block_size), generator=g)
        Yb = torch.randint(0, cfg.vocab_size, (cfg.batch_size,), generator=g)
    graph = forward(ex, shifted(params, spec.shift), Xb, Yb)
    true = true_gradients(ex, graph)
    upstream = true if spec.upstream == "true" else random_upstream(ex, graph, g)
    if any(s.kind == "training" for s in ex.steps):  # the batches of a short training run
        n, cfg = TRAINING_STEPS, spec.config
        graph["Xbs"] = torch.randint(
            0, cfg.vocab_size, (n, cfg.batch_size, cfg.block_size), generator=g
        )
        graph["Ybs"] = torch.randint(0, cfg.vocab_size, (n, cfg.batch_size), generator=g)
        graph["lr"] = LEARNING_RATE
    return Case(spec, ex, graph, upstream, exact=true)


def build(ex: Exercise, seed: int) -> list[Case]:
    """The hidden cases of ``ex`` for ``seed``, in grading order (the lecture case first)."""
    return [
        build_case(ex, spec, torch.Generator().manual_seed(seed * 7 + i))
        for i, spec in enumerate(ex.cases)
    ]

"""The hidden configurations a step is graded under, and their reference gradients.

A *case* is one forward graph (float32, as the student's code sees it) plus one upstream gradient
per variable. A step's code is run once per case with only the tensors of that case, and its
answer compared with the case's float64 reference (see :mod:`autograder.references`):

- ``lecture``: the lecture's parameters and batch, with the true upstream gradients;
- ``lecture-vjp``: the same tensors with random upstream gradients: an answer that is right only at
  the true gradient (``dlogit_maxes = 0``, the fused softmax formula for ``dlogits``) fails here;
- ``sizes-a``, ``sizes-b``: other sizes, all distinct and none a power of two, so hard-coded 32,
  27, 10 or 64 fail;
- ``repeats``: a batch in which one row of C occurs dozens of times, a few occur several times and
  many occur exactly once, so that dropped duplicate updates of dC show.

Every random draw comes from a generator seeded from the plan's seed, so ``Plan(seed)`` is the
same plan on every machine and ``--seed`` replays a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .catalog import FORWARD, PARAMETERS, ROOT, STEPS, Step
from .model import LECTURE, Config, Tensors, forward, init_params, lecture_graph, true_gradients
from .references import branches, to_float64

SIZES_A = Config(vocab_size=29, block_size=5, n_embd=7, n_hidden=37, batch_size=45)
SIZES_B = Config(vocab_size=31, block_size=6, n_embd=11, n_hidden=53, batch_size=19)
REPEATS = Config(vocab_size=37, block_size=7, n_embd=9, n_hidden=41, batch_size=13)
# How often the repeats batch uses its rows: one row 40 times, a few several times, 19 rows once.
REPEAT_USES = (40, 12, 8, 5, 3, 2, 2) + (1,) * 19


@dataclass
class Case:
    """One hidden configuration: the graph, the upstream gradients, the references per step."""

    name: str
    description: str
    config: Config
    true_upstream: bool
    graph: Tensors  # float32 forward graph, nothing requires grad
    upstream: dict[str, torch.Tensor]  # gradient name -> float32 tensor, for every variable
    graph64: Tensors = field(init=False)
    exact: dict[str, torch.Tensor] = field(default_factory=dict)  # autograd's float32 gradients
    # Caches, filled in the grader only (sandboxes fork from a copy made before any of this).
    _branches: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict, init=False)
    _references: dict[str, torch.Tensor] = field(default_factory=dict, init=False)
    _scales: dict[str, float] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.graph64 = to_float64(self.graph)

    def branches(self, step: Step) -> dict[str, torch.Tensor]:
        """The float64 chain-rule terms of ``step`` for this case, one per consumer (cached)."""
        if step.name not in self._branches:
            self._branches[step.name] = branches(step, self.graph64, self.upstream)
        return self._branches[step.name]

    def reference(self, step: Step) -> torch.Tensor:
        """The float64 reference gradient of ``step`` for this case (cached)."""
        if step.name not in self._references:
            terms = list(self.branches(step).values())
            self._references[step.name] = torch.stack(terms).sum(0) if len(terms) > 1 else terms[0]
        return self._references[step.name]

    def inputs(self, step: Step) -> dict[str, Any]:
        """What a step's code may read: sizes, data, parameters, forward tensors and the upstream
        gradients of the step's consumers (not the gradients of any other step)."""
        names = dict(self.graph)
        names.pop(ROOT, None)
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

    def row_uses(self) -> torch.Tensor:
        """How often the batch uses each row of C: ``(vocab_size,)`` counts."""
        return torch.bincount(self.graph["Xb"].flatten(), minlength=self.config.vocab_size)


def _random_upstream(graph: Tensors, g: torch.Generator) -> dict[str, torch.Tensor]:
    """An independent standard-normal gradient for every float tensor of the graph."""
    names = [var for var, _ in FORWARD if var != ROOT] + list(PARAMETERS)
    return {"d" + k: torch.randn(graph[k].shape, generator=g) for k in names}


def _random_graph(cfg: Config, g: torch.Generator, Xb: torch.Tensor | None = None) -> Tensors:
    params = init_params(cfg, g)
    if Xb is None:
        Xb = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.block_size), generator=g)
    Yb = torch.randint(0, cfg.vocab_size, (cfg.batch_size,), generator=g)
    return forward(params, Xb, Yb)


def _repeats_batch(cfg: Config, g: torch.Generator) -> torch.Tensor:
    """Xb whose row uses are exactly REPEAT_USES (rows and positions shuffled)."""
    rows = torch.randperm(cfg.vocab_size, generator=g)[: len(REPEAT_USES)]
    flat = torch.cat([torch.full((k,), int(r)) for r, k in zip(rows, REPEAT_USES, strict=True)])
    if flat.numel() != cfg.batch_size * cfg.block_size:  # pragma: no cover - guards edits
        raise ValueError("REPEAT_USES must fill the repeats batch exactly")
    flat = flat[torch.randperm(flat.numel(), generator=g)]
    return flat.view(cfg.batch_size, cfg.block_size)  # (13, 7)


def build_cases(seed: int) -> list[Case]:
    """The hidden configurations for ``seed``, in grading order (the lecture case first)."""
    lecture = lecture_graph()
    true = true_gradients(lecture)
    gens = [torch.Generator().manual_seed(seed * 7 + i) for i in range(4)]
    cases = [
        Case(
            "lecture",
            "lecture tensors, true upstream gradients",
            LECTURE,
            True,
            lecture,
            true,
            exact=true,
        ),
        Case(
            "lecture-vjp",
            "lecture tensors, random upstream gradients",
            LECTURE,
            False,
            lecture,
            _random_upstream(lecture, gens[0]),
        ),
    ]
    for name, cfg, g in (("sizes-a", SIZES_A, gens[1]), ("sizes-b", SIZES_B, gens[2])):
        graph = _random_graph(cfg, g)
        cases.append(
            Case(
                name,
                f"other sizes {cfg.as_dict()}, random upstream gradients",
                cfg,
                False,
                graph,
                _random_upstream(graph, g),
            )
        )
    g = gens[3]
    graph = _random_graph(REPEATS, g, _repeats_batch(REPEATS, g))
    cases.append(
        Case(
            "repeats",
            "rows of C used many times and once, random upstream gradients",
            REPEATS,
            False,
            graph,
            _random_upstream(graph, g),
        )
    )
    return cases


def warm(cases: list[Case]) -> None:
    """Compute every reference now (before workers fork, so they share them)."""
    for case in cases:
        for step in STEPS:
            case.reference(step)

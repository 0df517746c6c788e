"""The network of an exercise, run: parameters, the forward pass and autograd's gradients.

The forward pass is the exercise's own lines (:attr:`Exercise.forward`), evaluated in order in a
namespace holding the sizes, the batch, the parameters and every variable computed so far, with
``torch`` and ``F``: the same text the notebook shows. :func:`true_gradients` asks autograd for
the gradient of the loss with respect to every variable, through the whole graph: these are the
"true" upstream gradients of the lecture case and what the notebook's checks compare with. The
functions themselves are in :mod:`autograder.core.portable`, which the notebooks carry too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import torch

from ..exercises.definition import ROOT, Config, Exercise
from ..exercises.mlp import LECTURE_SEED
from .portable import autograd_gradients, init_params, run_forward

__all__ = ["forward", "init_params", "lecture_graph", "load_lecture_batch", "true_gradients"]

Tensors = dict[str, Any]
"""A namespace of the graph: tensor values by name, plus the integer sizes (``n`` and friends)."""

LECTURE_BATCH = "data/lecture_batch.json"
"""Package data (in :mod:`autograder.exercises`): the lecture's batch ``Xb``, ``Yb`` and the
seed that drew it, derived from names.txt by ``autograder.dataset.makemore``."""


def forward(
    ex: Exercise, params: Mapping[str, torch.Tensor], Xb: torch.Tensor, Yb: torch.Tensor
) -> Tensors:
    """Run ``ex``'s forward pass; returns the whole graph: sizes, data, parameters, every line."""
    return run_forward(ex.pass_lines, params, Xb, Yb)


def true_gradients(ex: Exercise, graph: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Gradients of the loss for every variable of ``graph`` (``"dW1"``, ``"dlogits"`` ...), by
    autograd through the whole pass; values keep ``graph``'s dtype."""
    return autograd_gradients(ex.pass_lines, graph, ex.parameters, ex.variables, ROOT)


def load_lecture_batch() -> tuple[torch.Tensor, torch.Tensor, int]:
    """The lecture batch ``(Xb, Yb, seed)`` from the package data (names.txt is not needed)."""
    text = resources.files("autograder.exercises").joinpath(LECTURE_BATCH).read_text()
    data = json.loads(text)
    Xb = torch.tensor(data["Xb"], dtype=torch.int64)  # (32, 3)
    Yb = torch.tensor(data["Yb"], dtype=torch.int64)  # (32,)
    return Xb, Yb, int(data["seed"])


def lecture_params(cfg: Config) -> Tensors:
    """The lecture's parameters: drawn from a generator seeded with the lecture's seed."""
    return init_params(cfg, torch.Generator().manual_seed(LECTURE_SEED))


def lecture_graph(ex: Exercise) -> Tensors:
    """The lecture configuration: parameters from the seeded generator, then the fixture batch."""
    Xb, Yb, _ = load_lecture_batch()
    return forward(ex, lecture_params(Config()), Xb, Yb)

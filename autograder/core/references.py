"""Reference gradients in float64: one vector-Jacobian product per consumer of a step.

For a step with variable ``v`` and consumers ``c_1 .. c_k``, given an upstream gradient ``g_i``
for each consumer, the reference is

    dv = sum_i  J_i^T g_i,     J_i = d c_i / d v  with every other consumer held fixed.

``J_i^T g_i`` is taken by re-evaluating, with ``v`` as a leaf, exactly the forward lines that
depend on ``v`` on the way to ``c_i`` without passing through another consumer, every other
value taken from the graph, and asking autograd for the gradient of ``<c_i, g_i>`` with respect
to ``v``. For an atomic pass (Exercise 1) that is the single line ``c_i = f(v, ...)``: its local
vector-Jacobian product. It is never a gradient through the whole graph, which would count an
indirect path (``counts -> counts_sum -> counts_sum_inv -> probs``) a second time. For a fused
consumer (a batch norm written as one expression) it is the whole fused function.

The terms are kept apart (:func:`branches`) because a missing term is a diagnosis of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..exercises.definition import ROOT, Exercise, Step
from .portable import partial_vjp, to_float64

__all__ = ["branches", "partial_vjp", "to_float64"]


def branches(
    ex: Exercise, step: Step, graph64: Mapping[str, Any], upstream: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """One term of the chain rule per consumer of ``step.var``, in float64.

    ``upstream`` maps gradient names (``dprobs``) to tensors; the root's gradient is 1.
    """
    terms: dict[str, torch.Tensor] = {}
    for consumer in step.consumers:
        if consumer == ROOT:
            g = torch.ones((), dtype=torch.float64)
        else:
            g = upstream["d" + consumer].detach().double()
        held = set(step.consumers) - {consumer}
        terms[consumer] = partial_vjp(ex.pass_lines, graph64, step.var, held, consumer, g)
    return terms

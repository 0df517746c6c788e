"""Reference gradients in float64, from local vector-Jacobian products.

For a step with variable ``v`` and consumers ``c_1 .. c_k`` (the forward lines that read ``v``
directly), given an upstream gradient ``g_c`` for each consumer, the reference is

    dv = sum_i  J_{c_i}(v)^T g_{c_i}

where ``J_{c_i}(v)`` is the Jacobian of the single line ``c_i = f(v, ...)`` with every other input
of that line held fixed. Each product is taken by re-evaluating that one line with ``v`` as a leaf
and asking autograd for the gradient of ``<c_i, g_{c_i}>`` with respect to ``v``: never a gradient
through the whole graph, which would count the indirect paths (``counts -> counts_sum ->
counts_sum_inv -> probs``) a second time.
The terms are kept apart (``branches``) because a missing term is a diagnosis of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .catalog import ROOT, Step
from .model import OPS


def to_float64(graph: Mapping[str, Any]) -> dict[str, Any]:
    """The same values in float64; integer tensors (Xb, Yb) and sizes are kept as they are."""
    return {
        k: v.detach().double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in graph.items()
    }


def local_vjp(
    graph64: Mapping[str, Any], consumer: str, var: str, upstream: torch.Tensor
) -> torch.Tensor:
    """``J^T upstream`` for the line defining ``consumer``, with respect to ``var`` alone."""
    leaf = graph64[var].detach().clone().requires_grad_(True)
    t = dict(graph64)
    t[var] = leaf
    with torch.enable_grad():
        out = OPS[consumer](t)
        # J^T g is the gradient of the scalar <out, g>. (Passing g as grad_outputs instead would
        # make torch import its symbolic-shapes machinery, half a second per grading process.)
        (grad,) = torch.autograd.grad((out * upstream).sum(), leaf, allow_unused=True)
    return torch.zeros_like(leaf) if grad is None else grad.detach()


def branches(
    step: Step, graph64: Mapping[str, Any], upstream: Mapping[str, torch.Tensor]
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
        terms[consumer] = local_vjp(graph64, consumer, step.var, g)
    return terms


def reference(
    step: Step, graph64: Mapping[str, Any], upstream: Mapping[str, torch.Tensor]
) -> torch.Tensor:
    """The complete gradient of ``step.var``: the sum of all its branches, in float64."""
    terms = list(branches(step, graph64, upstream).values())
    total = terms[0].clone()
    for term in terms[1:]:
        total += term
    return total

"""Judging one case of one step: strict shape, then the largest difference against a scale.

A case passes when the answer has exactly the variable's shape and

    max |answer - reference|  <=  RTOL * max(max|reference|, max|upstream gradients|)

The scale is the larger of the two because some true gradients (``dlogit_maxes``, ``db1``)
cancel to ~0, leaving only float32 rounding of terms the size of the upstream gradients. An
answer in another floating dtype is compared all the same (in float64); the dtype is reported.
"""

from __future__ import annotations

import torch

from ..core.cases import Case
from ..exercises.definition import Step
from .answers import Answer
from .results import CaseResult

RTOL = 1e-4
"""Tolerance relative to the case's scale; float32 answers land within ~1e-6 of it."""


def tolerance(case: Case, step: Step) -> float:
    """The bound a case's largest difference must stay under."""
    return RTOL * case.scale(step)


def compare(step: Step, case: Case, answer: Answer) -> CaseResult:
    """Judge one case of one step (see the module docstring)."""
    if answer.kind != "tensor" or answer.tensor is None:
        return CaseResult(case.name, False, None, None, answer.kind)
    ref = case.reference(step)
    got = answer.tensor
    if tuple(got.shape) != tuple(ref.shape):
        return CaseResult(case.name, False, None, None, "shape-mismatch")
    tol = tolerance(case, step)
    if got.numel() == 0:
        return CaseResult(case.name, True, 0.0, tol, "ok")
    diff = (got.to(torch.float64) - ref).abs()
    maxdiff = float(diff.max()) if bool(torch.isfinite(diff).all()) else float("inf")
    passed = maxdiff <= tol
    return CaseResult(case.name, passed, maxdiff, tol, "ok" if passed else "wrong-value")

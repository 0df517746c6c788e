"""Exercise 3: the gradient of the batch norm with respect to its input, in one expression.

``hpreact = bngain * (hprebn - mean) / sqrt(var + 1e-5) + bnbias`` over the batch, with the
variance's Bessel correction. Given ``dhpreact``, the gradient ``dhprebn`` has three parts: the
direct one, the one through the mean, and the one through the variance.
"""

from __future__ import annotations

from .definition import LECTURE, CaseSpec, Exercise, Step, Term, Text
from .mlp import (
    COMPACT_FORWARD,
    LEAF_SHAPES,
    NEAR_CONSTANT,
    PUBLIC_NEAR_CONSTANT,
    PUBLIC_SIZES,
    SIZES_A,
    SIZES_B,
)

STEP = Step(
    name="dhprebn",
    var="hprebn",
    consumers=("hpreact",),
    text="""
The batch norm turns each column of `hprebn` into `bnraw = (hprebn - bnmean) * bnvar_inv`, where
`bnmean` and `bnvar` are that column's mean and variance over the batch (with Bessel's
correction, `1/(n-1)`), then scales and shifts it: `hpreact = bngain * bnraw + bnbias`. Given
`dhpreact`, derive `dhprebn` on paper: every element of a column moves the mean and the variance
of its column, so besides the direct path (`bngain * bnvar_inv * dhpreact`) there is a path
through the mean and one through the variance. Simplify until you can write it in one
expression using `bngain`, `bnvar_inv`, `bnraw`, `dhpreact` and `n`.
""".strip(),
    answer=(
        "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0)"
        " - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))"
    ),
    terms=(
        Term("direct", "bngain * bnvar_inv * dhpreact", "the direct part"),
        Term(
            "mean",
            "-bngain * bnvar_inv / n * dhpreact.sum(0, keepdim=True)",
            "the part through the mean",
        ),
        Term(
            "variance",
            "-bngain * bnvar_inv / (n - 1) * bnraw * (dhpreact * bnraw).sum(0, keepdim=True)",
            "the part through the variance",
        ),
    ),
)

CASES: tuple[CaseSpec, ...] = (
    CaseSpec(
        "lecture",
        "the lecture's parameters and batch, with the true upstream gradient",
        LECTURE,
        upstream="true",
        batch="lecture",
    ),
    CaseSpec(
        "lecture-vjp",
        "the lecture's tensors with a random upstream gradient",
        LECTURE,
        batch="lecture",
    ),
    CaseSpec("sizes-a", f"other sizes ({SIZES_A.words()}), random upstream", SIZES_A),
    CaseSpec("sizes-b", f"other sizes ({SIZES_B.words()}), random upstream", SIZES_B),
    CaseSpec(
        "near-constant",
        "features whose batch variance is about 1e-4, where the 1e-5 matters",
        NEAR_CONSTANT,
        shift="near-constant",
    ),
)

PUBLIC: tuple[CaseSpec, ...] = (
    CaseSpec(
        "lecture",
        "this notebook's tensors with autograd's upstream gradient",
        LECTURE,
        upstream="true",
        batch="lecture",
    ),
    CaseSpec(
        "random upstream", "the same tensors, a random upstream gradient", LECTURE, batch="lecture"
    ),
    CaseSpec("other sizes", f"other sizes ({PUBLIC_SIZES.words()})", PUBLIC_SIZES),
    CaseSpec(
        "near-constant",
        "features whose batch variance is about 1e-4",
        PUBLIC_NEAR_CONSTANT,
        shift="near-constant",
    ),
)

EXERCISE = Exercise(
    id="batchnorm_backward",
    forward=COMPACT_FORWARD,
    steps=(STEP,),
    cases=CASES,
    public=PUBLIC,
    text=Text(
        title="Becoming a backprop ninja: Exercise 3",
        intro="""\
In Exercise 1 the batch norm was backpropagated through six small lines. Here you derive the
gradient of the whole layer with respect to its input in one expression: {n_steps} step. Take
the time to do the math on paper (the lecture walks through it); the result is one line.""",
        forward_intro="""\
The forward pass of the lecture's Exercises 2-4: the batch norm with `mean` and `var` (Bessel's
correction: `unbiased=True`), the loss in one call. `loss.backward()` at the end gives PyTorch's
gradients, which the check compares with yours.""",
        steps_intro="""\
Your answer reads the forward tensors and the upstream gradient `dhpreact`, and defines
`dhprebn`, of the shape of `hprebn`.""",
    ),
    leaf_shapes=LEAF_SHAPES,
)
"""Exercise 3."""

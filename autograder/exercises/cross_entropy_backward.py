"""Exercise 2: the gradient of the cross-entropy loss with respect to the logits, in one go.

The loss is ``F.cross_entropy(logits, Yb)``: the mean over the batch of ``-log softmax(logits)``
at each row's target. Its gradient is the softmax of the logits, minus one at each row's target,
divided by the batch size; the hidden configurations include logits in the hundreds, where a
softmax written without subtracting the row maximum overflows.
"""

from __future__ import annotations

from .definition import LECTURE, CaseSpec, Exercise, Step, Term, Text
from .mlp import COMPACT_FORWARD, LEAF_SHAPES, PUBLIC_SIZES, SIZES_A, SIZES_B

STEP = Step(
    name="dlogits",
    var="logits",
    consumers=("loss",),
    text="""
`loss = F.cross_entropy(logits, Yb)` is, row by row, the softmax of the logits followed by
`-log` of the probability at the target, averaged over the `n` rows. Work the derivative out on
paper for one row first: the gradient of `-log softmax(l)[y]` with respect to `l` is the softmax
itself, minus 1 at position `y`. The mean over the batch divides every row by `n`. Write
`dlogits` in one go, without the intermediate variables of Exercise 1; `F.softmax` is fine (it
subtracts each row's maximum before exponentiating, which you need for large logits).
""".strip(),
    answer="dlogits = F.softmax(logits, 1)\ndlogits[range(n), Yb] -= 1\ndlogits /= n",
    terms=(
        Term("softmax", "F.softmax(logits, 1) / n", "the softmax part"),
        Term(
            "one-hot",
            "-F.one_hot(Yb, num_classes=logits.shape[1]).double() / n",
            "the part that subtracts 1 at each row's target",
        ),
    ),
)

CASES: tuple[CaseSpec, ...] = (
    CaseSpec(
        "lecture",
        "the lecture's parameters and batch",
        LECTURE,
        upstream="true",
        batch="lecture",
    ),
    CaseSpec("sizes-a", f"other sizes ({SIZES_A.words()})", SIZES_A),
    CaseSpec("sizes-b", f"other sizes ({SIZES_B.words()})", SIZES_B),
    CaseSpec(
        "large-logits",
        "logits in the hundreds, where exp overflows unless each row's maximum is subtracted",
        LECTURE,
        shift="large-logits",
    ),
)

PUBLIC: tuple[CaseSpec, ...] = (
    CaseSpec(
        "lecture",
        "this notebook's tensors",
        LECTURE,
        upstream="true",
        batch="lecture",
    ),
    CaseSpec("other sizes", f"other sizes ({PUBLIC_SIZES.words()})", PUBLIC_SIZES),
    CaseSpec("large logits", "logits in the hundreds", LECTURE, shift="large-logits"),
)

EXERCISE = Exercise(
    id="cross_entropy_backward",
    forward=COMPACT_FORWARD,
    steps=(STEP,),
    cases=CASES,
    public=PUBLIC,
    text=Text(
        title="Becoming a backprop ninja: Exercise 2",
        intro="""\
In Exercise 1 the cross-entropy loss was written out in atomic steps and backpropagated one at
a time. Here the loss is one call, `F.cross_entropy(logits, Yb)`, and you derive its gradient
with respect to the logits in one expression: {n_steps} step. Do the math on paper first; the
result is short, and much faster than the chain of Exercise 1.""",
        forward_intro="""\
The forward pass of the lecture's Exercises 2-4: the batch norm with `mean` and `var`, the loss
in one call. `loss.backward()` at the end gives PyTorch's gradients, which the check compares
with yours.""",
        steps_intro="""\
Your answer reads the forward tensors (`logits`, `Yb`, `n`, ...) and defines `dlogits`, of the
shape of `logits`.""",
    ),
    leaf_shapes=LEAF_SHAPES,
)
"""Exercise 2."""

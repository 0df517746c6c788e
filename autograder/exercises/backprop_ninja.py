"""Exercise 1 of "becoming a backprop ninja": the backward pass one atomic line at a time.

The forward pass is the lecture's, "chunkated" into 20 atomic lines (the batch norm written out
with Bessel's correction, the cross-entropy written out as softmax, log and mean). Each of the 26
steps asks for the gradient of one variable, from ``dlogprobs`` down to ``dC``; the consumers of a
step are the lines that read its variable directly, so each term of a step's gradient is one
line's local vector-Jacobian product.

Why one module of this length: it is data, the 26 steps' explanations and model answers, one
exercise in one place.
"""

from __future__ import annotations

from .definition import LECTURE, CaseSpec, Exercise, Line, Scatter, Step, Text
from .mlp import (
    EMB,
    EMBCAT,
    HPREBN,
    LEAF_SHAPES,
    LOGITS,
    NEAR_CONSTANT,
    PUBLIC_NEAR_CONSTANT,
    PUBLIC_REPEAT_USES,
    PUBLIC_REPEATS,
    PUBLIC_SIZES,
    REPEATS,
    SIZES_A,
    SIZES_B,
    H,
)

FORWARD: tuple[Line, ...] = (
    EMB,
    EMBCAT,
    HPREBN,
    Line(
        "bnmeani",
        "bnmeani = 1/n*hprebn.sum(0, keepdim=True)",
        ("1", "n_hidden"),
        "# BatchNorm layer",
    ),
    Line("bndiff", "bndiff = hprebn - bnmeani", ("n", "n_hidden")),
    Line("bndiff2", "bndiff2 = bndiff**2", ("n", "n_hidden")),
    Line("bnvar", "bnvar = 1/(n-1)*bndiff2.sum(0, keepdim=True)", ("1", "n_hidden")),
    Line("bnvar_inv", "bnvar_inv = (bnvar + 1e-5)**-0.5", ("1", "n_hidden")),
    Line("bnraw", "bnraw = bndiff * bnvar_inv", ("n", "n_hidden")),
    Line("hpreact", "hpreact = bngain * bnraw + bnbias", ("n", "n_hidden")),
    H,
    LOGITS,
    Line(
        "logit_maxes",
        "logit_maxes = logits.max(1, keepdim=True).values",
        ("n", "1"),
        "# cross entropy loss (same as F.cross_entropy(logits, Yb))",
    ),
    Line("norm_logits", "norm_logits = logits - logit_maxes", ("n", "vocab_size")),
    Line("counts", "counts = norm_logits.exp()", ("n", "vocab_size")),
    Line("counts_sum", "counts_sum = counts.sum(1, keepdims=True)", ("n", "1")),
    Line("counts_sum_inv", "counts_sum_inv = counts_sum**-1", ("n", "1")),
    Line("probs", "probs = counts * counts_sum_inv", ("n", "vocab_size")),
    Line("logprobs", "logprobs = probs.log()", ("n", "vocab_size")),
    Line("loss", "loss = -logprobs[range(n), Yb].mean()", ()),
)
"""The forward pass of the lecture, one atomic line per variable, in execution order."""


def _step(var: str, consumers: str, text: str, answer: str, scatter: Scatter | None = None) -> Step:
    return Step(
        name="d" + var,
        var=var,
        consumers=tuple(consumers.split()),
        text=text.strip(),
        answer=answer,
        scatter=scatter,
    )


STEPS: tuple[Step, ...] = (
    _step(
        "logprobs",
        "loss",
        """
The loss picks one entry of `logprobs` per row, the log-probability of the correct next character
`Yb[i]`, and averages the negatives over the `n` examples. So only those `n` entries receive
gradient, each `-1/n`; every other entry of `dlogprobs` is zero. Start from a tensor of zeros
shaped like `logprobs` and fill in the picked entries (use `n`, not 32).
""",
        ("dlogprobs = torch.zeros_like(logprobs)\ndlogprobs[range(n), Yb] = -1.0 / n"),
    ),
    _step(
        "probs",
        "logprobs",
        """
`logprobs = probs.log()` is elementwise, and the derivative of `log(x)` is `1/x`. Multiply the
local derivative by the upstream gradient `dlogprobs` (chain rule, elementwise).
""",
        "dprobs = (1.0 / probs) * dlogprobs",
    ),
    _step(
        "counts_sum_inv",
        "probs",
        """
`probs = counts * counts_sum_inv` multiplies a `(n, vocab_size)` tensor by a `(n, 1)` column that
is broadcast across each row. The local derivative with respect to `counts_sum_inv` is `counts`;
because the column was reused for every entry of its row, its gradient is the sum over that row.
Keep the `(n, 1)` shape: sum with `keepdim=True`.
""",
        "dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)",
    ),
    _step(
        "counts_sum",
        "counts_sum_inv",
        """
`counts_sum_inv = counts_sum**-1`. The derivative of `x**-1` is `-x**-2`; multiply by the upstream
`dcounts_sum_inv`.
""",
        "dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv",
    ),
    _step(
        "counts",
        "probs counts_sum",
        """
`counts` is used twice: in `probs = counts * counts_sum_inv` and in
`counts_sum = counts.sum(1, keepdims=True)`. Its gradient is the sum of both paths: compute the
first, then **add** the second with `+=`. The sum hands its gradient to every element of the row
unchanged, so `dcounts_sum` is broadcast back across the row.
""",
        ("dcounts = counts_sum_inv * dprobs\ndcounts += torch.ones_like(counts) * dcounts_sum"),
    ),
    _step(
        "norm_logits",
        "counts",
        """
`counts = norm_logits.exp()`: the derivative of `exp(x)` is `exp(x)` itself, which you already
have as `counts`. Multiply by the upstream `dcounts`.
""",
        "dnorm_logits = counts * dcounts",
    ),
    _step(
        "logit_maxes",
        "norm_logits",
        """
`norm_logits = logits - logit_maxes` subtracts the `(n, 1)` column of row maxima from every entry
of the row. The local derivative is `-1`, and the column was reused across the row, so sum over
the row and keep the `(n, 1)` shape. (With the true upstream gradient this comes out as zeros up to
rounding: subtracting the max does not change the loss. The grader also tries other upstream
gradients, so write the chain rule, not the zeros.)
""",
        "dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)",
    ),
    _step(
        "logits",
        "norm_logits logit_maxes",
        """
`logits` flows into the loss along two paths: directly through `norm_logits = logits -
logit_maxes` (local derivative 1) and through `logit_maxes = logits.max(1, keepdim=True).values`,
which passes its gradient only to the position of each row's maximum. Sum both paths (`+=`), and
do not modify `dnorm_logits` while doing so: start from a copy (`.clone()`). For the max path,
`F.one_hot` needs `num_classes` set to the number of columns.
""",
        (
            "dlogits = dnorm_logits.clone()\n"
            "dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1])"
            " * dlogit_maxes"
        ),
    ),
    _step(
        "h",
        "logits",
        """
`logits = h @ W2 + b2`. For a matrix product `Y = X @ W`, the gradient with respect to `X` is
`dY @ W.T`. Check the shapes: `(n, vocab_size) @ (vocab_size, n_hidden)` gives `(n, n_hidden)`.
""",
        "dh = dlogits @ W2.T",
    ),
    _step(
        "W2",
        "logits",
        """
`logits = h @ W2 + b2`. The gradient with respect to the right factor of a matrix product is
`X.T @ dY`; the shapes must come out as `(n_hidden, vocab_size)`, like `W2`.
""",
        "dW2 = h.T @ dlogits",
    ),
    _step(
        "b2",
        "logits",
        """
`b2` has shape `(vocab_size,)` and is broadcast over all `n` rows, so its gradient is `dlogits`
summed over the batch dimension. Keep `b2`'s exact shape: a one-dimensional vector, so **no**
`keepdim` here.
""",
        "db2 = dlogits.sum(0)",
    ),
    _step(
        "hpreact",
        "h",
        """
`h = torch.tanh(hpreact)`. The derivative of `tanh` is `1 - tanh**2`, and you already have
`tanh(hpreact)` as `h`. Multiply by the upstream `dh`.
""",
        "dhpreact = (1.0 - h**2) * dh",
    ),
    _step(
        "bngain",
        "hpreact",
        """
`hpreact = bngain * bnraw + bnbias`. `bngain` has shape `(1, n_hidden)` and is broadcast down the
batch, so multiply the local derivative `bnraw` by `dhpreact` and sum over the batch dimension,
keeping the `(1, n_hidden)` shape.
""",
        "dbngain = (bnraw * dhpreact).sum(0, keepdim=True)",
    ),
    _step(
        "bnbias",
        "hpreact",
        """
`bnbias` (shape `(1, n_hidden)`) is added to every row of `hpreact`: its gradient is `dhpreact`
summed over the batch, keeping the `(1, n_hidden)` shape.
""",
        "dbnbias = dhpreact.sum(0, keepdim=True)",
    ),
    _step(
        "bnraw",
        "hpreact",
        """
`hpreact = bngain * bnraw + bnbias`: the local derivative with respect to `bnraw` is `bngain`,
broadcast across the batch; multiply by `dhpreact`.
""",
        "dbnraw = bngain * dhpreact",
    ),
    _step(
        "bnvar_inv",
        "bnraw",
        """
`bnraw = bndiff * bnvar_inv`, where `bnvar_inv` is a `(1, n_hidden)` row broadcast down the
batch. Local derivative: `bndiff`; multiply by `dbnraw`, sum over the batch, keep the row shape.
""",
        "dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)",
    ),
    _step(
        "bnvar",
        "bnvar_inv",
        """
`bnvar_inv = (bnvar + 1e-5)**-0.5`. Power rule: the derivative of `x**-0.5` is `-0.5 * x**-1.5`,
evaluated at `bnvar + 1e-5`. Multiply by `dbnvar_inv`.
""",
        "dbnvar = (-0.5 * (bnvar + 1e-5)**-1.5) * dbnvar_inv",
    ),
    _step(
        "bndiff2",
        "bnvar",
        """
`bnvar = 1/(n-1)*bndiff2.sum(0, keepdim=True)`: this is the unbiased variance, with Bessel's
correction `1/(n-1)`, not `1/n`. Every element of a column of `bndiff2` contributes `1/(n-1)` to
that column's variance, so the row `dbnvar` is broadcast back down the batch, scaled by `1/(n-1)`.
""",
        "dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar",
    ),
    _step(
        "bndiff",
        "bndiff2 bnraw",
        """
`bndiff` is used twice: in `bndiff2 = bndiff**2` (local derivative `2*bndiff`) and in
`bnraw = bndiff * bnvar_inv` (local derivative `bnvar_inv`). Add both contributions.
""",
        ("dbndiff = bnvar_inv * dbnraw\ndbndiff += (2 * bndiff) * dbndiff2"),
    ),
    _step(
        "bnmeani",
        "bndiff",
        """
`bndiff = hprebn - bnmeani` subtracts the `(1, n_hidden)` row of means from every row. The local
derivative is `-1`, and the row was broadcast down the batch, so sum over the batch dimension and
keep the `(1, n_hidden)` shape.
""",
        "dbnmeani = (-dbndiff).sum(0, keepdim=True)",
    ),
    _step(
        "hprebn",
        "bndiff bnmeani",
        """
`hprebn` reaches the loss along two paths: directly through `bndiff = hprebn - bnmeani` (local
derivative 1) and through the mean `bnmeani = 1/n*hprebn.sum(0, keepdim=True)`, which hands every
row `1/n` of `dbnmeani`. Sum both paths without modifying `dbndiff` (copy it first).
""",
        ("dhprebn = dbndiff.clone()\ndhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)"),
    ),
    _step(
        "embcat",
        "hprebn",
        """
`hprebn = embcat @ W1 + b1`: the gradient with respect to the left factor is `dY @ W.T`, of shape
`(n, block_size*n_embd)`.
""",
        "dembcat = dhprebn @ W1.T",
    ),
    _step(
        "W1",
        "hprebn",
        """
`hprebn = embcat @ W1 + b1`: the gradient with respect to the right factor is `X.T @ dY`, of shape
`(block_size*n_embd, n_hidden)`.
""",
        "dW1 = embcat.T @ dhprebn",
    ),
    _step(
        "b1",
        "hprebn",
        """
`b1` (shape `(n_hidden,)`) is added to every row: sum `dhprebn` over the batch and keep `b1`'s
one-dimensional shape (no `keepdim`). In the true graph this gradient is almost exactly zero,
because batch norm subtracts the mean right after; the grader checks it with other upstream
gradients too, so it must still be the real chain rule.
""",
        "db1 = dhprebn.sum(0)",
    ),
    _step(
        "emb",
        "embcat",
        """
`embcat = emb.view(emb.shape[0], -1)` only reshapes. The gradient is `dembcat` with the view
undone: reshape it back to the shape of `emb`, `(n, block_size, n_embd)`, without writing the sizes
in by hand (they differ under the grader's other configurations).
""",
        "demb = dembcat.view(emb.shape)",
    ),
    _step(
        "C",
        "emb",
        """
`emb = C[Xb]` copies row `Xb[i, j]` of the embedding table into position `(i, j)` of `emb`. Every
such use sends `demb[i, j]` back into that row of `C`, and rows the batch uses several times must
**accumulate** every one of their uses. Beware: `dC[Xb] += demb` runs without error but, for an
index that appears more than once, applies only one of the updates. Accumulate with a loop over the
batch using `+=`, or with an operation made for scatter-adding (such as `index_add_`).
""",
        (
            "dC = torch.zeros_like(C)\n"
            "for k in range(Xb.shape[0]):\n"
            "    for j in range(Xb.shape[1]):\n"
            "        ix = Xb[k, j]\n"
            "        dC[ix] += demb[k, j]"
        ),
        Scatter(index="Xb"),
    ),
)
"""The 26 steps in the order the exercise asks for them: from the loss down to the table C."""

CASES: tuple[CaseSpec, ...] = (
    CaseSpec(
        "lecture",
        "the lecture's parameters and batch, with the true upstream gradients",
        LECTURE,
        upstream="true",
        batch="lecture",
    ),
    CaseSpec(
        "lecture-vjp",
        "the lecture's tensors with random upstream gradients (checks the chain rule itself, "
        "where the true gradient is ~0 or a shortcut happens to be right)",
        LECTURE,
        batch="lecture",
    ),
    CaseSpec("sizes-a", f"other sizes ({SIZES_A.words()}), random upstream gradients", SIZES_A),
    CaseSpec("sizes-b", f"other sizes ({SIZES_B.words()}), random upstream gradients", SIZES_B),
    CaseSpec(
        "repeats",
        "a batch that uses one row of C 40 times, a few several times and many once "
        "(a scatter that drops repeated indices shows)",
        REPEATS,
        batch="repeats",
    ),
    CaseSpec(
        "near-constant",
        "features whose batch variance is about 1e-4, where the batch norm's 1e-5 matters",
        NEAR_CONSTANT,
        shift="near-constant",
    ),
)
"""The hidden configurations, the lecture's first."""

PUBLIC: tuple[CaseSpec, ...] = (
    CaseSpec(
        "lecture",
        "this notebook's tensors with autograd's upstream gradients",
        LECTURE,
        upstream="true",
        batch="lecture",
    ),
    CaseSpec(
        "random upstream", "the same tensors, random upstream gradients", LECTURE, batch="lecture"
    ),
    CaseSpec("other sizes", f"other sizes ({PUBLIC_SIZES.words()})", PUBLIC_SIZES),
    CaseSpec(
        "repeated rows",
        "a batch that uses one row of C 20 times, a few several times, the others once",
        PUBLIC_REPEATS,
        batch="repeats",
        uses=PUBLIC_REPEAT_USES,
    ),
    CaseSpec(
        "near-constant",
        "features whose batch variance is about 1e-4",
        PUBLIC_NEAR_CONSTANT,
        shift="near-constant",
    ),
)
"""The notebook's own checks: the lecture's tensors, then public configurations."""

TEXT = Text(
    title="Becoming a backprop ninja: Exercise 1",
    intro="""\
You will backpropagate **by hand** through the character-level MLP of makemore part 4: an
embedding table, a linear layer, batch norm, tanh, a second linear layer and the cross-entropy
loss, written out in small atomic steps. For each of the {n_steps} variables of the forward
pass, from `logprobs` down to the embedding table `C`, you compute the gradient of the loss with
respect to it, one at a time: `dlogprobs`, `dprobs`, ..., `dC`.""",
    forward_intro="""\
"Chunkated" into the small steps that you will backward one at a time. Each line is followed by
the shape of its result. `loss.backward()` at the end stores PyTorch's gradient of every variable
(`t.grad`), which the checks compare with yours.""",
    steps_intro="""\
From the loss down to the embedding table. Each gradient has exactly the shape of its variable.
Upstream gradients you computed before are there to use (in grading, and in each check, they come
from autograd, so one wrong step never spoils the next). There are {n_steps} steps.""",
)

EXERCISE = Exercise(
    id="backprop_ninja",
    forward=FORWARD,
    steps=STEPS,
    cases=CASES,
    public=PUBLIC,
    text=TEXT,
    leaf_shapes=LEAF_SHAPES,
)
"""Exercise 1."""

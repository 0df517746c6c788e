"""The step catalog: the single description of Exercise 1 that everything else derives from.

The forward pass is a list of atomic lines, ``FORWARD``; each of the 26 steps of the exercise asks
for the gradient of the loss with respect to one variable of that pass. A step's gradient is the
sum, over the variables that consume it directly (``Step.consumers``), of each consumer's local
vector-Jacobian product:

    d var = sum over c in consumers of  (d c / d var)^T  d c

so a step is graded from the upstream gradients ``d c`` alone (``Step.upstream``), never from the
student's own answers to earlier steps. The notebook cells, nbgrader grade ids, the pytest
parametrisation and the reports are all generated from, or checked against, this module.
"""

from __future__ import annotations

from dataclasses import dataclass

ROOT = "loss"
"""The scalar at the top of the graph: its gradient is 1 by definition, never an input."""

FORWARD: tuple[tuple[str, str], ...] = (
    ("emb", "emb = C[Xb]"),
    ("embcat", "embcat = emb.view(emb.shape[0], -1)"),
    ("hprebn", "hprebn = embcat @ W1 + b1"),
    ("bnmeani", "bnmeani = 1/n*hprebn.sum(0, keepdim=True)"),
    ("bndiff", "bndiff = hprebn - bnmeani"),
    ("bndiff2", "bndiff2 = bndiff**2"),
    ("bnvar", "bnvar = 1/(n-1)*bndiff2.sum(0, keepdim=True)"),
    ("bnvar_inv", "bnvar_inv = (bnvar + 1e-5)**-0.5"),
    ("bnraw", "bnraw = bndiff * bnvar_inv"),
    ("hpreact", "hpreact = bngain * bnraw + bnbias"),
    ("h", "h = torch.tanh(hpreact)"),
    ("logits", "logits = h @ W2 + b2"),
    ("logit_maxes", "logit_maxes = logits.max(1, keepdim=True).values"),
    ("norm_logits", "norm_logits = logits - logit_maxes"),
    ("counts", "counts = norm_logits.exp()"),
    ("counts_sum", "counts_sum = counts.sum(1, keepdims=True)"),
    ("counts_sum_inv", "counts_sum_inv = counts_sum**-1"),
    ("probs", "probs = counts * counts_sum_inv"),
    ("logprobs", "logprobs = probs.log()"),
    ("loss", "loss = -logprobs[range(n), Yb].mean()"),
)
"""The forward pass of the lecture, one atomic line per variable, in execution order."""

PARAMETERS: tuple[str, ...] = ("C", "W1", "b1", "bngain", "bnbias", "W2", "b2")
"""Leaves of the graph that are trained."""

DATA: tuple[str, ...] = ("Xb", "Yb")
"""Leaves that are integer data: the batch of contexts and their targets."""

SIZES: tuple[str, ...] = ("n", "vocab_size", "block_size", "n_embd", "n_hidden")
"""Integers every step may read; in hidden configurations they take other values."""

SHAPES: dict[str, tuple[str, ...]] = {
    "C": ("vocab_size", "n_embd"),
    "emb": ("n", "block_size", "n_embd"),
    "embcat": ("n", "block_size*n_embd"),
    "W1": ("block_size*n_embd", "n_hidden"),
    "b1": ("n_hidden",),
    "hprebn": ("n", "n_hidden"),
    "bnmeani": ("1", "n_hidden"),
    "bndiff": ("n", "n_hidden"),
    "bndiff2": ("n", "n_hidden"),
    "bnvar": ("1", "n_hidden"),
    "bnvar_inv": ("1", "n_hidden"),
    "bnraw": ("n", "n_hidden"),
    "bngain": ("1", "n_hidden"),
    "bnbias": ("1", "n_hidden"),
    "hpreact": ("n", "n_hidden"),
    "h": ("n", "n_hidden"),
    "W2": ("n_hidden", "vocab_size"),
    "b2": ("vocab_size",),
    "logits": ("n", "vocab_size"),
    "logit_maxes": ("n", "1"),
    "norm_logits": ("n", "vocab_size"),
    "counts": ("n", "vocab_size"),
    "counts_sum": ("n", "1"),
    "counts_sum_inv": ("n", "1"),
    "probs": ("n", "vocab_size"),
    "logprobs": ("n", "vocab_size"),
    "loss": (),
}
"""Symbolic shape of every tensor of the graph; a gradient has exactly its variable's shape."""


@dataclass(frozen=True)
class Step:
    """One gradient the student computes.

    Attributes:
        name: the gradient's name in the notebook, also its nbgrader grade_id (``dcounts``).
        var: the forward variable it is the gradient of (``counts``).
        consumers: forward variables computed directly from ``var``; each is one path of the
            chain rule, and all of them must be summed.
        points: nbgrader points for the step.
        text: what the notebook tells the student, in a teacher's words (markdown).
    """

    name: str
    var: str
    consumers: tuple[str, ...]
    text: str
    points: float = 1.0

    @property
    def upstream(self) -> tuple[str, ...]:
        """Upstream gradients the step is given: one per consumer (the loss needs none)."""
        return tuple("d" + c for c in self.consumers if c != ROOT)

    @property
    def line(self) -> str:
        """The forward line that defines ``var`` (for a parameter: the line that uses it)."""
        lines = dict(FORWARD)
        return lines[self.var] if self.var in lines else lines[self.consumers[0]]

    @property
    def consumer_lines(self) -> tuple[str, ...]:
        """The forward lines through which the gradient flows back into ``var``."""
        lines = dict(FORWARD)
        return tuple(lines[c] for c in self.consumers)

    @property
    def shape(self) -> tuple[str, ...]:
        """Symbolic shape of the gradient, equal to the shape of ``var``."""
        return SHAPES[self.var]

    @property
    def test_id(self) -> str:
        """The grade_id of the locked cell that grades this step."""
        return "test_" + self.name


def _step(var: str, consumers: str, text: str) -> Step:
    return Step(name="d" + var, var=var, consumers=tuple(consumers.split()), text=text.strip())


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
    ),
    _step(
        "probs",
        "logprobs",
        """
`logprobs = probs.log()` is elementwise, and the derivative of `log(x)` is `1/x`. Multiply the
local derivative by the upstream gradient `dlogprobs` (chain rule, elementwise).
""",
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
    ),
    _step(
        "counts_sum",
        "counts_sum_inv",
        """
`counts_sum_inv = counts_sum**-1`. The derivative of `x**-1` is `-x**-2`; multiply by the upstream
`dcounts_sum_inv`.
""",
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
    ),
    _step(
        "norm_logits",
        "counts",
        """
`counts = norm_logits.exp()`: the derivative of `exp(x)` is `exp(x)` itself, which you already
have as `counts`. Multiply by the upstream `dcounts`.
""",
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
    ),
    _step(
        "h",
        "logits",
        """
`logits = h @ W2 + b2`. For a matrix product `Y = X @ W`, the gradient with respect to `X` is
`dY @ W.T`. Check the shapes: `(n, vocab_size) @ (vocab_size, n_hidden)` gives `(n, n_hidden)`.
""",
    ),
    _step(
        "W2",
        "logits",
        """
`logits = h @ W2 + b2`. The gradient with respect to the right factor of a matrix product is
`X.T @ dY`; the shapes must come out as `(n_hidden, vocab_size)`, like `W2`.
""",
    ),
    _step(
        "b2",
        "logits",
        """
`b2` has shape `(vocab_size,)` and is broadcast over all `n` rows, so its gradient is `dlogits`
summed over the batch dimension. Keep `b2`'s exact shape: a one-dimensional vector, so **no**
`keepdim` here.
""",
    ),
    _step(
        "hpreact",
        "h",
        """
`h = torch.tanh(hpreact)`. The derivative of `tanh` is `1 - tanh**2`, and you already have
`tanh(hpreact)` as `h`. Multiply by the upstream `dh`.
""",
    ),
    _step(
        "bngain",
        "hpreact",
        """
`hpreact = bngain * bnraw + bnbias`. `bngain` has shape `(1, n_hidden)` and is broadcast down the
batch, so multiply the local derivative `bnraw` by `dhpreact` and sum over the batch dimension,
keeping the `(1, n_hidden)` shape.
""",
    ),
    _step(
        "bnbias",
        "hpreact",
        """
`bnbias` (shape `(1, n_hidden)`) is added to every row of `hpreact`: its gradient is `dhpreact`
summed over the batch, keeping the `(1, n_hidden)` shape.
""",
    ),
    _step(
        "bnraw",
        "hpreact",
        """
`hpreact = bngain * bnraw + bnbias`: the local derivative with respect to `bnraw` is `bngain`,
broadcast across the batch; multiply by `dhpreact`.
""",
    ),
    _step(
        "bnvar_inv",
        "bnraw",
        """
`bnraw = bndiff * bnvar_inv`, where `bnvar_inv` is a `(1, n_hidden)` row broadcast down the
batch. Local derivative: `bndiff`; multiply by `dbnraw`, sum over the batch, keep the row shape.
""",
    ),
    _step(
        "bnvar",
        "bnvar_inv",
        """
`bnvar_inv = (bnvar + 1e-5)**-0.5`. Power rule: the derivative of `x**-0.5` is `-0.5 * x**-1.5`,
evaluated at `bnvar + 1e-5`. Multiply by `dbnvar_inv`.
""",
    ),
    _step(
        "bndiff2",
        "bnvar",
        """
`bnvar = 1/(n-1)*bndiff2.sum(0, keepdim=True)`: this is the unbiased variance, with Bessel's
correction `1/(n-1)`, not `1/n`. Every element of a column of `bndiff2` contributes `1/(n-1)` to
that column's variance, so the row `dbnvar` is broadcast back down the batch, scaled by `1/(n-1)`.
""",
    ),
    _step(
        "bndiff",
        "bndiff2 bnraw",
        """
`bndiff` is used twice: in `bndiff2 = bndiff**2` (local derivative `2*bndiff`) and in
`bnraw = bndiff * bnvar_inv` (local derivative `bnvar_inv`). Add both contributions.
""",
    ),
    _step(
        "bnmeani",
        "bndiff",
        """
`bndiff = hprebn - bnmeani` subtracts the `(1, n_hidden)` row of means from every row. The local
derivative is `-1`, and the row was broadcast down the batch, so sum over the batch dimension and
keep the `(1, n_hidden)` shape.
""",
    ),
    _step(
        "hprebn",
        "bndiff bnmeani",
        """
`hprebn` reaches the loss along two paths: directly through `bndiff = hprebn - bnmeani` (local
derivative 1) and through the mean `bnmeani = 1/n*hprebn.sum(0, keepdim=True)`, which hands every
row `1/n` of `dbnmeani`. Sum both paths without modifying `dbndiff` (copy it first).
""",
    ),
    _step(
        "embcat",
        "hprebn",
        """
`hprebn = embcat @ W1 + b1`: the gradient with respect to the left factor is `dY @ W.T`, of shape
`(n, block_size*n_embd)`.
""",
    ),
    _step(
        "W1",
        "hprebn",
        """
`hprebn = embcat @ W1 + b1`: the gradient with respect to the right factor is `X.T @ dY`, of shape
`(block_size*n_embd, n_hidden)`.
""",
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
    ),
    _step(
        "emb",
        "embcat",
        """
`embcat = emb.view(emb.shape[0], -1)` only reshapes. The gradient is `dembcat` with the view
undone: reshape it back to the shape of `emb`, `(n, block_size, n_embd)`, without writing the sizes
in by hand (they differ under the grader's other configurations).
""",
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
    ),
)
"""The 26 steps in the order the exercise asks for them: from the loss down to the table C."""

BY_NAME: dict[str, Step] = {s.name: s for s in STEPS}
"""Steps by gradient name."""


def step(name: str) -> Step:
    """The step called ``name`` (``"dC"``); raises KeyError naming the valid names otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown step {name!r}; the steps are: {', '.join(BY_NAME)}") from None


def total_points() -> float:
    """The maximum score of a submission."""
    return sum(s.points for s in STEPS)

"""Exercise 4: training the MLP with your own backward pass instead of ``loss.backward()``.

The forward pass is the lecture's (Exercises 2-4). Each gradient has an answer cell of its own,
graded in isolation like Exercise 1's steps (the cross-entropy and the batch norm in one
expression each, as in Exercises 2 and 3); the ``update`` cell applies gradient descent, and it
is graded by a short training run of all the notebook's cells, whose losses must track training
with autograd's gradients. The notebook then trains longer and samples names.
"""

from __future__ import annotations

from .batchnorm_backward import STEP as BATCHNORM_STEP
from .cross_entropy_backward import STEP as CROSS_ENTROPY_STEP
from .definition import LECTURE, CaseSpec, Exercise, Scatter, Step, Text
from .mlp import (
    COMPACT_FORWARD,
    LEAF_SHAPES,
    NEAR_CONSTANT,
    PUBLIC_SIZES,
    REPEATS,
    SIZES_A,
    SIZES_B,
)


def _step(name: str, var: str, consumer: str, text: str, answer: str, **kw: object) -> Step:
    return Step(name, var, (consumer,), text.strip(), answer, **kw)  # type: ignore[arg-type]


STEPS: tuple[Step, ...] = (
    CROSS_ENTROPY_STEP,
    _step(
        "dh",
        "h",
        "logits",
        "`logits = h @ W2 + b2`: as in Exercise 1, `dlogits @ W2.T`, of the shape of `h`.",
        "dh = dlogits @ W2.T",
    ),
    _step(
        "dW2",
        "W2",
        "logits",
        "`logits = h @ W2 + b2`: the gradient of the right factor, `h.T @ dlogits`.",
        "dW2 = h.T @ dlogits",
    ),
    _step(
        "db2",
        "b2",
        "logits",
        "`b2` is added to every row: `dlogits` summed over the batch, of shape `(vocab_size,)`.",
        "db2 = dlogits.sum(0)",
    ),
    _step(
        "dhpreact",
        "hpreact",
        "h",
        "`h = torch.tanh(hpreact)`: the derivative of `tanh` is `1 - h**2`, times `dh`.",
        "dhpreact = (1.0 - h**2) * dh",
    ),
    _step(
        "dbngain",
        "bngain",
        "hpreact",
        "`hpreact = bngain * bnraw + bnbias`: `bnraw * dhpreact` summed over the batch, keeping "
        "the `(1, n_hidden)` shape.",
        "dbngain = (bnraw * dhpreact).sum(0, keepdim=True)",
    ),
    _step(
        "dbnbias",
        "bnbias",
        "hpreact",
        "`bnbias` is added to every row: `dhpreact` summed over the batch, keeping the shape.",
        "dbnbias = dhpreact.sum(0, keepdim=True)",
    ),
    BATCHNORM_STEP,
    _step(
        "dembcat",
        "embcat",
        "hprebn",
        "`hprebn = embcat @ W1 + b1`: `dhprebn @ W1.T`.",
        "dembcat = dhprebn @ W1.T",
    ),
    _step(
        "dW1",
        "W1",
        "hprebn",
        "`hprebn = embcat @ W1 + b1`: `embcat.T @ dhprebn`.",
        "dW1 = embcat.T @ dhprebn",
    ),
    _step(
        "db1",
        "b1",
        "hprebn",
        "`b1` is added to every row: `dhprebn` summed over the batch, of shape `(n_hidden,)`.",
        "db1 = dhprebn.sum(0)",
    ),
    _step(
        "demb",
        "emb",
        "embcat",
        "`embcat` is a view of `emb`: undo it, reading the shape from `emb.shape`.",
        "demb = dembcat.view(emb.shape)",
    ),
    _step(
        "dC",
        "C",
        "emb",
        "`emb = C[Xb]`: every use of a row of `C` sends its row of `demb` back into it, and a "
        "row used several times must accumulate all of them (a loop with `+=`, or "
        "`index_add_`; never `dC[Xb] += demb`). Start from zeros on every iteration.",
        "dC = torch.zeros_like(C)\n"
        "dC.index_add_(0, Xb.view(-1), demb.view(-1, demb.shape[2]))",
        scatter=Scatter(index="Xb"),
    ),
    Step(
        name="update",
        var="parameters",
        consumers=(),
        text="""
Now use your gradients: `parameters` holds `C, W1, b1, W2, b2, bngain, bnbias` and `grads` holds
your `dC, dW1, db1, dW2, db2, dbngain, dbnbias`, in the same order. Apply one step of gradient
descent to every parameter, in place: subtract the learning rate `lr` times its gradient. This
cell is checked by training the network for a few iterations with all your cells and comparing
the losses with training by `loss.backward()`.
""".strip(),
        answer="for p, grad in zip(parameters, grads):\n    p.data += -lr * grad",
        points=2.0,
        kind="training",
    ),
)

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
        "the lecture's tensors with random upstream gradients",
        LECTURE,
        batch="lecture",
    ),
    CaseSpec("sizes-a", f"other sizes ({SIZES_A.words()}), random upstream", SIZES_A),
    CaseSpec("sizes-b", f"other sizes ({SIZES_B.words()}), random upstream", SIZES_B),
    CaseSpec(
        "repeats", "a batch that uses one row of C 40 times and many once", REPEATS, batch="repeats"
    ),
    CaseSpec(
        "near-constant",
        "features whose batch variance is about 1e-4",
        NEAR_CONSTANT,
        shift="near-constant",
    ),
)

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
)

EXERCISE = Exercise(
    id="manual_training",
    forward=COMPACT_FORWARD,
    steps=STEPS,
    cases=CASES,
    public=PUBLIC,
    text=Text(
        title="Becoming a backprop ninja: Exercise 4",
        intro="""\
Put it all together: train the MLP with your own backward pass instead of `loss.backward()`.
Write each gradient in its cell (the cross-entropy and the batch norm in one expression each,
as in Exercises 2 and 3), then the update. Each gradient is checked on its own, like the steps
of Exercise 1; the update is checked by training the network for a few iterations with all your
cells and comparing the losses with training by autograd. At the end the notebook trains with
your backward pass for longer and samples names from the network. {n_steps} steps.""",
        forward_intro="""\
The forward pass of the lecture's Exercises 2-4. In the training loop it runs on a new batch
every iteration, followed by your cells; here it runs once, on the lecture's batch, for the
checks.""",
        steps_intro="""\
Each cell reads the forward tensors and the gradients computed before it (in the checks, and in
grading, those come from autograd) and defines one gradient, of the shape of its variable.""",
        outro="""\
## Training with your backward pass

The cell below trains the network for a few thousand iterations with your cells, starting from
the seeded initialisation, then samples names from it.""",
    ),
    leaf_shapes=LEAF_SHAPES,
)
"""Exercise 4."""

"""What the lecture's exercises share: the character-level MLP, its leaves and its sizes.

Every exercise of the kit backpropagates through the same network (an embedding table ``C``, a
linear layer ``W1, b1``, batch norm ``bngain, bnbias``, tanh, a linear layer ``W2, b2``) on a
batch ``Xb, Yb`` of contexts and next characters. The parameters are initialised as in the
lecture, all from one seeded generator (see :func:`autograder.core.model.init_params`).
"""

from __future__ import annotations

from .definition import Config, Line

LECTURE_SEED = 2147483647
"""The seed of the lecture's generator."""

LEAF_SHAPES: dict[str, tuple[str, ...]] = {
    "C": ("vocab_size", "n_embd"),
    "W1": ("block_size*n_embd", "n_hidden"),
    "b1": ("n_hidden",),
    "W2": ("n_hidden", "vocab_size"),
    "b2": ("vocab_size",),
    "bngain": ("1", "n_hidden"),
    "bnbias": ("1", "n_hidden"),
    "Xb": ("n", "block_size"),
    "Yb": ("n",),
}
"""Symbolic shapes of the parameters and the batch."""

# The hidden configurations' sizes: all distinct within a configuration and none a power of
# two, so that a hard-coded 32, 27, 10, 64 or view(32, 3, 10) fails.
SIZES_A = Config(vocab_size=29, block_size=5, n_embd=7, n_hidden=37, batch_size=45)
SIZES_B = Config(vocab_size=31, block_size=6, n_embd=11, n_hidden=53, batch_size=19)
REPEATS = Config(vocab_size=37, block_size=7, n_embd=9, n_hidden=41, batch_size=13)
NEAR_CONSTANT = Config(vocab_size=23, block_size=3, n_embd=6, n_hidden=43, batch_size=21)

# The notebook's public configurations: other sizes again, none of them the hidden ones.
PUBLIC_SIZES = Config(vocab_size=19, block_size=7, n_embd=5, n_hidden=17, batch_size=11)
PUBLIC_REPEATS = Config(vocab_size=13, block_size=5, n_embd=6, n_hidden=15, batch_size=9)
PUBLIC_NEAR_CONSTANT = Config(vocab_size=17, block_size=3, n_embd=7, n_hidden=23, batch_size=14)
PUBLIC_REPEAT_USES = (20, 8, 5, 3, 2, 2) + (1,) * 5
"""How often the notebook's ``repeats`` batch uses its rows of C (9 x 5 = 45 uses)."""

REPEAT_USES = (40, 12, 8, 5, 3, 2, 2) + (1,) * 19
"""How often the ``repeats`` batch uses its rows of C: one row 40 times, a few several times, 19
rows once (13 examples x 7 positions = 91 uses)."""

# The embedding and the first linear layer, as every exercise writes them.
EMB = Line("emb", "emb = C[Xb]", ("n", "block_size", "n_embd"), "# embedding of the context")
EMBCAT = Line("embcat", "embcat = emb.view(emb.shape[0], -1)", ("n", "block_size*n_embd"))
HPREBN = Line("hprebn", "hprebn = embcat @ W1 + b1", ("n", "n_hidden"), "# Linear layer 1")
H = Line("h", "h = torch.tanh(hpreact)", ("n", "n_hidden"), "# Non-linearity")
LOGITS = Line("logits", "logits = h @ W2 + b2", ("n", "vocab_size"), "# Linear layer 2")

# The forward pass as the lecture's Exercises 2-4 write it: the batch norm with `mean` and `var`
# (Bessel's correction, as `unbiased=True`), the loss as one `F.cross_entropy`.
BNMEAN = Line("bnmean", "bnmean = hprebn.mean(0, keepdim=True)", ("1", "n_hidden"), "# BatchNorm")
BNVAR = Line("bnvar", "bnvar = hprebn.var(0, keepdim=True, unbiased=True)", ("1", "n_hidden"))
BNVAR_INV = Line("bnvar_inv", "bnvar_inv = (bnvar + 1e-5)**-0.5", ("1", "n_hidden"))
BNRAW = Line("bnraw", "bnraw = (hprebn - bnmean) * bnvar_inv", ("n", "n_hidden"))
HPREACT = Line("hpreact", "hpreact = bngain * bnraw + bnbias", ("n", "n_hidden"))
CROSS_ENTROPY = Line("loss", "loss = F.cross_entropy(logits, Yb)", (), "# the loss, in one call")
COMPACT_FORWARD: tuple[Line, ...] = (EMB, EMBCAT, HPREBN, BNMEAN, BNVAR, BNVAR_INV, BNRAW)
COMPACT_FORWARD += (HPREACT, H, LOGITS, CROSS_ENTROPY)
"""The forward pass of Exercises 2-4."""

"""Notebooks in the lecture's own format, written for the kit's tests, with the verdict each
step must get.

Each :class:`LectureCase` is a notebook built from a compact description: the setup cells
(imports, data, parameters, batch, a ``cmp`` check), the forward pass, then the learner's cells.
The descriptions copy the shapes real learners' notebooks take (answers split across cells,
several attempts, temporaries, renamed variables, helpers in other cells, Exercise 2 before
Exercise 1, commented-out attempts, stale outputs, the slips the lecture's ``cmp`` lets
through); the code is the kit's own. ``expect`` maps ``"step"`` (Exercise 1) or
``"exercise:step"`` to ``"pass"`` or the code of the first diagnosis; a step not listed passes,
and an exercise not in ``exercises`` must not be graded at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.exercises import BACKPROP_NINJA, BATCHNORM_BACKWARD, CROSS_ENTROPY_BACKWARD

EX1, EX2, EX3 = BACKPROP_NINJA, CROSS_ENTROPY_BACKWARD, BATCHNORM_BACKWARD
CE, BN = EX2.id, EX3.id

Cell = dict[str, Any]


def code(source: str, outputs: Sequence[str] = ()) -> Cell:
    """A code cell; ``outputs`` are stale printed lines (the reader must ignore them)."""
    cell: Cell = {
        "cell_type": "code",
        "execution_count": 1 if outputs else None,
        "metadata": {},
        "source": source.strip("\n").splitlines(keepends=True),
        "outputs": [],
    }
    if outputs:
        text = [line + "\n" for line in outputs]
        cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": text}]
    return cell


def markdown(text: str) -> Cell:
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}


def rename(text: str, names: Mapping[str, str]) -> str:
    """``text`` with whole-word names replaced (``W1`` -> ``w1``)."""
    for old, new in names.items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


IMPORTS = """
import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt
%matplotlib inline
"""

DATA = """
words = open('names.txt', 'r').read().splitlines()
letters = sorted(set(''.join(words)))
stoi = {ch: i + 1 for i, ch in enumerate(letters)}
stoi['.'] = 0
vocab_size = len(stoi)
block_size = 3

def make_examples(ws):
    xs, ys = [], []
    for w in ws:
        window = [0] * block_size
        for ch in w + '.':
            xs.append(window)
            ys.append(stoi[ch])
            window = window[1:] + [stoi[ch]]
    return torch.tensor(xs), torch.tensor(ys)

Xtr, Ytr = make_examples(words)
"""

CMP = """
def cmp(label, mine, t):
    same = bool((mine == t.grad).all())
    close = torch.allclose(mine, t.grad)
    print(f'{label:15s} exact {same} close {close} maxdiff {(mine - t.grad).abs().max().item()}')
"""

PARAMETERS = """
n_embd = 10
n_hidden = 64
g = torch.Generator().manual_seed(1234)
C = torch.randn((vocab_size, n_embd), generator=g)
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * 0.3
b1 = torch.randn(n_hidden, generator=g) * 0.1
W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
b2 = torch.randn(vocab_size, generator=g) * 0.1
bngain = torch.randn((1, n_hidden), generator=g) * 0.1 + 1.0
bnbias = torch.randn((1, n_hidden), generator=g) * 0.1
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
for p in parameters:
    p.requires_grad = True
"""

BATCH = """
batch_size = 32
n = batch_size
ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
Xb, Yb = Xtr[ix], Ytr[ix]
"""

BACKWARD = """
for p in parameters:
    p.grad = None
for t in [emb, embcat, hprebn, bnmeani, bndiff, bndiff2, bnvar, bnvar_inv, bnraw, hpreact, h,
          logits, logit_maxes, norm_logits, counts, counts_sum, counts_sum_inv, probs, logprobs]:
    t.retain_grad()
loss.backward()
loss
"""

EXERCISE2_FORWARD = """
# Exercise 2: the loss in one call
loss_fast = F.cross_entropy(logits, Yb)
print(loss_fast.item(), (loss_fast - loss).item())
"""

EXERCISE3_FORWARD = """
# Exercise 3: batch norm in one go
spread = (hprebn.var(0, keepdim=True, unbiased=True) + 1e-5)**-0.5
hpreact_fast = bngain * (hprebn - hprebn.mean(0, keepdim=True)) * spread + bnbias
print((hpreact_fast - hpreact).abs().max())
"""

EXERCISE4 = """
# Exercise 4: training with the manual backward pass
n_hidden = 200
C = torch.randn((vocab_size, n_embd), generator=g)
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * 0.2
b1 = torch.randn(n_hidden, generator=g) * 0.1
W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
b2 = torch.randn(vocab_size, generator=g) * 0.1
bngain = torch.ones((1, n_hidden))
bnbias = torch.zeros((1, n_hidden))
parameters = [C, W1, b1, W2, b2, bngain, bnbias]
with torch.no_grad():
    for i in range(1000):
        ix = torch.randint(0, Xtr.shape[0], (n,), generator=g)
        Xb, Yb = Xtr[ix], Ytr[ix]
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmean = hprebn.mean(0, keepdim=True)
        bnvar = hprebn.var(0, keepdim=True, unbiased=True)
        bnvar_inv = (bnvar + 1e-5)**-0.5
        bnraw = (hprebn - bnmean) * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        dlogits = F.softmax(logits, 1)
        dlogits[range(n), Yb] -= 1
        dlogits /= n
        dh = dlogits @ W2
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        dhpreact = (1.0 - h**2) * dh
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnbias = dhpreact.sum(0, keepdim=True)
        dhprebn = bngain*bnvar_inv/n * (n*dhpreact - dhpreact.sum(0)
                                        - n/(n-1)*bnraw*(dhpreact*bnraw).sum(0))
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        demb = dembcat.view(emb.shape)
        dC = torch.zeros_like(C)
        dC.index_add_(0, Xb.view(-1), demb.view(-1, n_embd))
        grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]
        for p, grad in zip(parameters, grads):
            p.data += -0.1 * grad
"""


def forward(names: Mapping[str, str] = {}) -> str:
    """The forward pass, one line per variable, as the kit writes it (names renamed)."""
    lines = []
    for line in EX1.forward:
        if line.section:
            lines.append(line.section)
        lines.append(line.source)
    return rename("\n".join(lines), names)


def answer(step: str) -> str:
    """The kit's model answer of an Exercise 1 step."""
    return EX1.step(step).answer


def check(step: str, names: Mapping[str, str] = {}) -> str:
    """The lecture's check after a step: ``cmp('h', dh, h)``."""
    var = EX1.step(step).var
    return rename(f"cmp('{var}', {step}, {var})", names)


def exercise1(
    overrides: Mapping[str, str] = {},
    names: Mapping[str, str] = {},
    skip: Sequence[str] = (),
    checks: bool = True,
) -> str:
    """Exercise 1 in one cell: every step's answer (the model's unless overridden), each
    followed by its check."""
    parts = ["# Exercise 1: backprop through the whole thing by hand"]
    for step in EX1.steps:
        if step.name in skip:
            continue
        text = overrides.get(step.name, answer(step.name))
        parts.append(rename(text, names))
        if checks:
            parts.append(check(step.name, names))
    return "\n".join(parts)


def setup(names: Mapping[str, str] = {}) -> list[Cell]:
    """Everything before the forward pass, and the forward pass with PyTorch's backward."""
    return [
        markdown("## makemore: becoming a backprop ninja"),
        code(IMPORTS),
        code(DATA, outputs=["32033"]),
        code(CMP),
        code(rename(PARAMETERS, names), outputs=["4137"]),
        code(rename(BATCH, names)),
        code(
            rename("# forward pass, chunked\n", names) + forward(names) + "\n" + BACKWARD,
            outputs=["tensor(3.3471, grad_fn=<NegBackward0>)"],
        ),
    ]


def exercise2(answer: str = "") -> list[Cell]:
    body = answer or EX2.steps[0].answer
    return [code(EXERCISE2_FORWARD), code(body + "\ncmp('logits', dlogits, logits)")]


def exercise3(answer: str = "") -> list[Cell]:
    body = answer or EX3.steps[0].answer
    return [code(EXERCISE3_FORWARD), code(body + "\ncmp('hprebn', dhprebn, hprebn)")]


@dataclass(frozen=True)
class LectureCase:
    """One notebook of the corpus and the verdicts its steps must get."""

    name: str
    structure: str  # what of real notebooks it copies, in words
    cells: list[Cell]
    expect: dict[str, str] = field(default_factory=dict)
    exercises: tuple[str, ...] = (EX1.id, CE, BN)
    where: dict[str, str] = field(default_factory=dict)  # "step" -> expected `where`

    def expected(self, exercise: str, step: str) -> str:
        key = step if exercise == EX1.id else f"{exercise}:{step}"
        return self.expect.get(key, "pass")

    def notebook(self) -> dict[str, Any]:
        return {
            "cells": self.cells,
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }

    def write(self, folder: Path) -> Path:
        path = folder / f"{self.name}.ipynb"
        path.write_text(json.dumps(self.notebook(), indent=1))
        return path


def _cells(*parts: Cell | list[Cell]) -> list[Cell]:
    out: list[Cell] = []
    for p in parts:
        out += p if isinstance(p, list) else [p]
    return out


RENAMED = {
    "W1": "w1",
    "W2": "w2",
    "Xb": "xb",
    "Yb": "yb",
    "bndiff2": "bndiffsq",
    "dbndiff2": "dbndiffsq",
    "logit_maxes": "logits_maxes",
    "dlogit_maxes": "dlogits_maxes",
}
"""A learner's own names for tensors (their gradients follow: ``dbndiffsq``...)."""

SPLIT_TWO_PATHS = """
dlogprobs = torch.zeros_like(logprobs)
dlogprobs[range(n), Yb] = -1.0 / n
dprobs = (1.0 / probs) * dlogprobs
dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
dcounts = counts_sum_inv * dprobs
dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv
dcounts += torch.ones_like(counts) * dcounts_sum
dnorm_logits = counts * dcounts
dlogits = dnorm_logits.clone()
dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
dh = dlogits @ W2.T
dW2 = h.T @ dlogits
db2 = dlogits.sum(0)
dhpreact = (1.0 - h**2) * dh
dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
dbnraw = bngain * dhpreact
dbnbias = dhpreact.sum(0, keepdim=True)
dbndiff = bnvar_inv * dbnraw
dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
dbnvar = (-0.5 * (bnvar + 1e-5)**-1.5) * dbnvar_inv
dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar
dbndiff += (2 * bndiff) * dbndiff2
dhprebn = dbndiff.clone()
dbnmeani = (-dbndiff).sum(0, keepdim=True)
dhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)
dembcat = dhprebn @ W1.T
dW1 = embcat.T @ dhprebn
db1 = dhprebn.sum(0)
demb = dembcat.view(emb.shape)
dC = torch.zeros_like(C)
for k in range(Xb.shape[0]):
    for j in range(Xb.shape[1]):
        dC[Xb[k, j]] += demb[k, j]
"""
"""Exercise 1 as the lecture orders it: each two-path gradient's second part comes lines after
its first (dcounts, dlogits, dbndiff, dhprebn), other steps between."""

CHECKS = "\n".join(check(s.name) for s in EX1.steps)


CASES: tuple[LectureCase, ...] = (
    LectureCase(
        "split_two_paths",
        "split two-path answers (dcounts = ... early, dcounts += ... later), checks at the end, "
        "Exercises 2 and 3 after, Exercise 4's training loop last",
        _cells(
            setup(),
            code(SPLIT_TWO_PATHS + "\n" + CHECKS, outputs=["logprobs exact True"]),
            exercise2(),
            exercise3(),
            code(EXERCISE4),
        ),
        where={"dcounts": "cell 8, lines 5, 7", "dC": "cell 8, lines 31-34"},
    ),
    LectureCase(
        "cell_per_step",
        "one cell per step, scratch cells with shapes and prints between them",
        _cells(
            setup(),
            *[
                _cells(code(f"{s.var}.shape, {s.name}.shape"), code(answer(s.name)))
                for s in EX1.steps
            ],
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "attempts_last_right",
        "several attempts at one step, the last one right (the one meant)",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dh": "dh = dlogits @ W2\ncmp('h', dh, h)\ndh = W2 @ dlogits\n"
                        "dh = dlogits @ W2.T",
                        "db2": "db2 = dlogits.sum(0, keepdim=True)\ndb2 = dlogits.sum(0)",
                    }
                )
            ),
            code("dbnvar = 1/(n-1) * dbnvar_inv"),  # a scratch try, wrong ...
            code(answer("dbnvar")),  # ... then the right one below it
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "attempts_last_wrong",
        "several attempts, the last one wrong: the last is graded, even after a right one",
        _cells(
            setup(),
            code(exercise1()),
            code("dW1 = dhprebn.T @ embcat\ncmp('W1', dW1, W1)"),
        ),
        expect={"dW1": "transposed"},
        exercises=(EX1.id,),
    ),
    LectureCase(
        "temporaries",
        "temporaries (temp, mask, dcounts1) feeding an answer, one defined cells before",
        _cells(
            setup(),
            code("ones_row = torch.ones_like(counts)"),
            code(
                exercise1(
                    {
                        "dcounts": "dcounts1 = counts_sum_inv * dprobs\n"
                        "dcounts2 = ones_row * dcounts_sum\ndcounts = dcounts1 + dcounts2",
                        "dlogits": "mask = torch.zeros_like(logits)\n"
                        "mask[range(n), logits.argmax(1)] = 1\n"
                        "dlogits = dnorm_logits.clone()\ndlogits += mask * dlogit_maxes",
                        "dbnvar": "temp = (bnvar + 1e-5)**-1.5\ndbnvar = -0.5 * temp * dbnvar_inv",
                    }
                )
            ),
        ),
        exercises=(EX1.id,),
        where={"dcounts": "cell 8, line 1; cell 9, lines 11-13"},
    ),
    LectureCase(
        "renamed_tensors",
        "renamed variables: batch_size for n, w1/w2, xb/yb, bndiffsq, logits_maxes; gradients "
        "named after them (dbndiffsq, dlogits_maxes)",
        _cells(
            setup({**RENAMED, "n": "batch_size"}),
            code(exercise1(names={**RENAMED, "n": "batch_size"})),
            exercise2(rename(EX2.steps[0].answer, {"Yb": "yb", "n": "batch_size"})),
        ),
        exercises=(EX1.id, CE),
    ),
    LectureCase(
        "renamed_gradients",
        "gradients under the learner's own names (dL_dlogits, dbatch_norm_raw...), mapped "
        "through the cmp calls",
        _cells(
            setup(),
            code(
                exercise1(
                    names={
                        "dlogits": "dL_dlogits",
                        "dbnraw": "dbatch_norm_raw",
                        "dhprebn": "dbhprebn",
                        "dlogit_maxes": "dlogits_maxes",
                    }
                )
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "gradient_named_by_its_flow",
        "h renamed a, and the gradient of hpreact named da (as if it were a's): its code, "
        "computed from dh, tells which gradient it is; no checks to go by",
        _cells(
            setup({"h": "a", "hpreact": "apreact"}),
            code(exercise1(names={"h": "a", "hpreact": "apreact", "dhpreact": "da"}, checks=False)),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "helper_in_another_cell",
        "a helper function defined in another cell, an import alias, a with torch.no_grad() block",
        _cells(
            setup(),
            code(
                "import torch.nn.functional as nnf\n\n"
                "def sum_back(grad, like):\n"
                "    # sum a broadcast gradient back to the shape of `like`\n"
                "    for dim, size in enumerate(like.shape):\n"
                "        if size == 1:\n"
                "            grad = grad.sum(dim, keepdim=True)\n"
                "    return grad\n"
            ),
            code(
                "with torch.no_grad():\n"
                + "\n".join(
                    "    " + line
                    for line in exercise1(
                        {
                            "dbngain": "dbngain = sum_back(bnraw * dhpreact, bngain)",
                            "dbnvar_inv": "dbnvar_inv = sum_back(bndiff * dbnraw, bnvar_inv)",
                            "dlogits": "dlogits = dnorm_logits.clone()\n"
                            "dlogits += nnf.one_hot(logits.max(1).indices, "
                            "num_classes=logits.shape[1]) * dlogit_maxes",
                        }
                    ).splitlines()
                )
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "exercise2_first",
        "Exercise 2's cell before Exercise 1's, and Exercise 3's above both",
        _cells(setup(), exercise3(), exercise2(), code(exercise1())),
    ),
    LectureCase(
        "exercise2_inside_exercise1",
        "Exercise 2's one-go dlogits written inside Exercise 1's cell, next to the chain rule one",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dlogits": answer("dlogits") + "\n# the fast way, Exercise 2:\n"
                        "dlogits = F.softmax(logits, 1)\ndlogits[range(n), Yb] -= 1\n"
                        "dlogits /= n",
                    }
                )
            ),
        ),
        exercises=(EX1.id, CE),
    ),
    LectureCase(
        "only_the_fast_dlogits",
        "Exercise 1's dlogits skipped: the only dlogits is Exercise 2's, graded there",
        _cells(setup(), code(exercise1(skip=["dlogits"])), exercise2()),
        expect={"dlogits": "not-implemented"},
        exercises=(EX1.id, CE),
    ),
    LectureCase(
        "commented_out_and_stale_outputs",
        "commented-out attempts, a docstring, stale outputs from an earlier run",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dlogits": "# dlogits = dnorm_logits\n" + answer("dlogits"),
                        "dW1": '"""first try: dW1 = dhprebn @ embcat"""\n'
                        + answer("dW1")
                        + "\n# dW1 = embcat @ dhprebn",
                    }
                ),
                outputs=["W1 exact False close False maxdiff 1.3", "C exact True"],
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "cmp_passing_slips",
        "what the lecture's cmp lets through: dbnmeani of shape (64,), db1 of shape (1, 64), "
        "zeros((32, 27)), num_classes=27, view(-1, 3, 10), a dlogits without the max branch",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dbnmeani": "dbnmeani = (-dbndiff).sum(0)",
                        "db1": "db1 = dhprebn.sum(0, keepdim=True)",
                        "dlogprobs": "dlogprobs = torch.zeros((32, 27))\n"
                        "dlogprobs[range(n), Yb] = -1.0 / n",
                        "dlogits": "dlogits = dnorm_logits.clone()\ndlogits += F.one_hot("
                        "logits.max(1).indices, num_classes=27) * dlogit_maxes",
                        "demb": "demb = dembcat.view(-1, 3, 10)",
                        "dh": "dh = dlogits @ W2.T",
                    }
                )
            ),
        ),
        expect={
            "dbnmeani": "shape-mismatch",
            "db1": "shape-mismatch",
            "dlogprobs": "hard-coded-size",
            "dlogits": "hard-coded-size",
            "demb": "hard-coded-size",
        },
        exercises=(EX1.id,),
    ),
    LectureCase(
        "more_slips",
        "a dlogits without the logit_maxes branch, dlogits = dnorm_logits then += (changes "
        "dnorm_logits), .grad pasted in, dbndiff2 without the broadcast, dC[Xb] += demb",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dlogits": "dlogits = dnorm_logits.clone()",
                        "dhprebn": "dhprebn = dbndiff\n"
                        "dhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)",
                        "dhpreact": answer("dhpreact") + "\ndhpreact = hpreact.grad",
                        "dbndiff2": "dbndiff2 = 1/(n-1) * dbnvar",
                        "dC": "dC = torch.zeros_like(C)\ndC[Xb] += demb",
                    }
                )
            ),
        ),
        expect={
            "dlogits": "missing-branch",
            "dhprebn": "in-place-mutation",
            "dhpreact": "uses-autograd",
            "dbndiff2": "shape-mismatch",
            "dC": "scatter-drops-duplicates",
        },
        exercises=(EX1.id,),
    ),
    LectureCase(
        "unfinished",
        "stopped after dh: the rest is not implemented; a cell with a syntax error",
        _cells(
            setup(),
            code(
                "\n".join(answer(s) for s in ("dlogprobs", "dprobs", "dcounts_sum_inv"))
                + "\ndcounts = counts_sum_inv * dprobs"  # no dcounts_sum part
            ),
            code("dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv\ndcounts_sum.shape"),
            code("dnorm_logits = counts * dcounts\ndh = dlogits @ W2.T +"),  # a syntax error
        ),
        expect={
            "dcounts": "missing-branch",
            **{
                s.name: "not-implemented"
                for s in EX1.steps
                if s.name  # the line above the unfinished one is read: dnorm_logits
                not in (
                    "dlogprobs",
                    "dprobs",
                    "dcounts_sum_inv",
                    "dcounts_sum",
                    "dcounts",
                    "dnorm_logits",
                )
            },
        },
        exercises=(EX1.id,),
    ),
    LectureCase(
        "gradients_not_given",
        "a step that reads a gradient it is not given: for its shape only (passes), and for its "
        "values (skips a step: fails, saying so); a name only another cell defines",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dbndiff2": "dbndiff2 = (1.0 / (n - 1))"
                        " * torch.ones_like(dbndiff) * dbnvar",
                        "dcounts_sum": "dcounts_sum = -counts_sum**-2"
                        " * (counts * dprobs).sum(1, keepdim=True)",
                        "dC": "dC = torch.zeros_like(C)\n"
                        "dC.index_add_(0, Xtr[ix].view(-1), demb.view(-1, demb.shape[2]))",
                    }
                )
            ),
        ),
        expect={"dcounts_sum": "error", "dC": "error"},
        exercises=(EX1.id,),
    ),
    LectureCase(
        "alternative_spellings",
        "other correct spellings: one expression for a two-path gradient, a tuple assignment, "
        "index_add_, x = x + ..., transpose calls",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dcounts": "dcounts = counts_sum_inv * dprobs + dcounts_sum",
                        "dh": "dh, dW2 = dlogits @ W2.transpose(0, 1), h.T @ dlogits",
                        "dW2": "",
                        "dbndiff": "dbndiff = bnvar_inv * dbnraw\n"
                        "dbndiff = dbndiff + 2 * bndiff * dbndiff2",
                        "dC": "dC = torch.zeros_like(C).index_add_(0, Xb.flatten(), "
                        "demb.reshape(-1, C.shape[1]))",
                    }
                )
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "changed_by_a_call",
        "gradients filled in by a call that takes them as an argument: numpy's add.at, a "
        "matmul with out=, an in-place method called on the class; and a wrong dh under "
        "`if False:`, which never runs",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dC": "import numpy as np\n"
                        "dC_np = np.zeros(tuple(C.shape), dtype=np.float32)\n"
                        "np.add.at(dC_np, Xb.numpy(), demb.numpy())\n"
                        "dC = torch.from_numpy(dC_np)",
                        "dW1": "dW1 = torch.empty_like(W1)\n"
                        "torch.matmul(embcat.T, dhprebn, out=dW1)",
                        "db1": "db1 = torch.zeros_like(b1)\ntorch.Tensor.add_(db1, dhprebn.sum(0))",
                        "dh": answer("dh") + "\nif False:\n    dh = 2 * dlogits @ W2.T",
                    }
                )
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "helpers_of_ones_own",
        "answers through the notebook's own helpers: a function that fills its argument in "
        "place, an object whose call keeps what its method reads (micrograd style)",
        _cells(
            setup(),
            code(
                "def scatter(table, index, rows):\n"
                "    for k in range(index.shape[0]):\n"
                "        for j in range(index.shape[1]):\n"
                "            table[index[k, j]] += rows[k, j]\n"
                "\n"
                "class Tanh:\n"
                "    def __call__(self, x):\n"
                "        self.out = torch.tanh(x)\n"
                "        return self.out\n"
                "    def backward(self, dout):\n"
                "        return (1 - self.out**2) * dout"
            ),
            code(
                exercise1(
                    {
                        "dC": "dC = torch.zeros_like(C)\nscatter(dC, Xb, demb)",
                        "dhpreact": "act = Tanh()\nact(hpreact)\ndhpreact = act.backward(dh)",
                    }
                )
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "read_as_python_runs_it",
        "code the reader must read as Python runs it, not line by line: a tuple assignment whose "
        "value reads a name it binds first (dh gets the old t, zeros), a contextlib.suppress "
        "that skips the rest of its body (dW2 is never assigned in it), torch.no_grad() around "
        "an answer (runs as written), rebindings no assignment shows: a walrus, exec of a "
        "constant string, globals()['name'] = ...",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dh": "t = torch.zeros_like(h)\nt, dh = dlogits @ W2.T, t",
                        "dW2": "import contextlib\nwith contextlib.suppress(ZeroDivisionError):"
                        "\n    1 / 0\n    dW2 = h.T @ dlogits",
                        "db2": "with torch.no_grad():\n    db2 = dlogits.sum(0)",
                        "dW1": answer("dW1") + "\n(dW1 := dW1 * 2)",
                        "db1": answer("db1") + "\nexec('db1 = db1 * 2')",
                        "dbnbias": answer("dbnbias") + "\nglobals()['dbnbias'] = dbnbias * 2",
                    }
                )
            ),
        ),
        expect={
            "dh": "ignores-upstream",
            "dW2": "error",
            "dW1": "wrong-scale",
            "db1": "wrong-scale",
            "dbnbias": "wrong-scale",
        },
        exercises=(EX1.id,),
    ),
    LectureCase(
        "one_go_variants",
        "Exercise 2 from probs (a tensor of Exercise 1's pass), Exercise 3 from bndiff with "
        "Bessel's correction forgotten",
        _cells(
            setup(),
            code(exercise1()),
            exercise2("dlogits = probs.clone()\ndlogits[range(n), Yb] -= 1\ndlogits = dlogits / n"),
            exercise3(
                "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) "
                "- bnraw * (dhpreact * bnraw).sum(0))"
            ),
        ),
        expect={f"{BN}:dhprebn": "wrong-scale"},
    ),
    LectureCase(
        "indented_cell",
        "Exercise 1 pasted with every line indented (Jupyter strips a cell's common leading "
        "indentation, so it runs)",
        _cells(
            setup(),
            code("\n".join("    " + line for line in exercise1().split("\n"))),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "gradient_temporary_in_the_cell",
        "dlogit_maxes read from the learner's dlogits, a copy of dnorm_logits made one line "
        "before (a gradient the step is not given, computed from one it is)",
        _cells(
            setup(),
            code(
                exercise1(
                    {
                        "dlogit_maxes": "dlogits = dnorm_logits.clone()\n"
                        "dlogit_maxes = -dlogits.sum(1, keepdim=True)",
                        "dlogits": "dlogits += F.one_hot(logits.max(1).indices, "
                        "num_classes=logits.shape[1]) * dlogit_maxes",
                    }
                )
            ),
        ),
        exercises=(EX1.id,),
    ),
    LectureCase(
        "exercise2_cell_with_its_own_temporaries",
        "Exercise 2 in a cell of its own that recomputes forward tensors (counts, counts_sum) "
        "and changes one in place, or that goes through Exercise 1's gradient names "
        "(dlogprobs, dnorm_logits): only its dlogits is checked; Exercise 1's answers are the "
        "earlier cell's",
        _cells(
            setup(),
            code(exercise1()),
            code(EXERCISE2_FORWARD),
            code(
                "counts = logits.exp()\ncounts_sum = counts.sum(1, keepdims=True)\n"
                "counts[range(n), Yb] -= counts_sum[:, 0]\n"
                "dlogits = (1 / n) * counts * counts_sum**-1\n"
                "cmp('logits', dlogits, logits)"
            ),
        ),
        expect={f"{CE}:dlogits": "wrong-value"},  # exp without the max shift overflows
        exercises=(EX1.id, CE),
    ),
    LectureCase(
        "exercise2_through_exercise1_names",
        "Exercise 2 written through Exercise 1's gradient names in a cell that checks only "
        "dlogits, and Exercise 3 written step by step in a cell that checks only dhprebn",
        _cells(
            setup(),
            code(exercise1()),
            code(EXERCISE2_FORWARD),
            code(
                "dlogprobs = torch.zeros_like(logprobs)\ndlogprobs[range(n), Yb] = -1.0 / n\n"
                "dnorm_logits = -counts * counts_sum_inv * ((counts / probs * dlogprobs "
                "* counts_sum_inv).sum(1, keepdim=True) - dlogprobs / probs)\n"
                "dlogits = dnorm_logits\ncmp('logits', dlogits, logits)"
            ),
            code(EXERCISE3_FORWARD),
            code(
                "dbnraw = bngain * dhpreact\ndbndiff = bnvar_inv * dbnraw\n"
                "dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)\n"
                "dbnvar = (-0.5 * (bnvar + 1e-5)**-1.5) * dbnvar_inv\n"
                "dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar\n"
                "dbndiff += (2 * bndiff) * dbndiff2\n"
                "dbnmeani = (-dbndiff).sum(0, keepdim=True)\n"
                "dhprebn = dbndiff.clone()\n"
                "dhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)\n"
                "cmp('hprebn', dhprebn, hprebn)"
            ),
        ),
        # right in exact arithmetic, but it divides by probabilities that underflow to 0
        expect={f"{CE}:dlogits": "wrong-value"},
    ),
    LectureCase(
        "unfinished_last_line",
        "Exercise 1 in one cell ending in an unfinished `dC =` (the cell never ran whole), a "
        "broken `if` block and an unclosed bracket in the middle: every statement that is valid "
        "Python is read",
        _cells(
            setup(),
            code(
                exercise1(skip=["dC", "dbnvar"])
                + "\nif dbnvar_inv is not None\n    dbnvar = 0\nsizes = (n,\n"
                + "dbnvar = (-0.5 * (bnvar + 1e-5)**-1.5) * dbnvar_inv\ndC ="
            ),
        ),
        expect={"dC": "not-implemented", "dbnvar": "not-implemented"},
        exercises=(EX1.id,),
    ),
    LectureCase(
        "one_go_with_autograd",
        "a correct Exercise 1, then a later cell trying Exercise 3's formula with `hpreact.grad` "
        "for `dhpreact` and checking it as `cmp('y', y, hprebn)`, and `dbndiff2` written from "
        "its own name for the shape (it ran only in a kernel that had it from before)",
        _cells(
            setup(),
            code(
                exercise1(
                    {"dbndiff2": "dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(dbndiff2) * dbnvar"}
                )
            ),
            exercise2(),
            code(
                "y = bngain * bnvar_inv / n * (n * hpreact.grad - hpreact.grad.sum(0) - n / (n - 1)"
                " * bnraw * (hpreact.grad * bnraw).sum(0))\ncmp('y', y, hprebn)"
            ),
        ),
        expect={f"{BN}:dhprebn": "uses-autograd"},
    ),
    LectureCase(
        "unfinished_one_go",
        "Exercise 1 right, then a later cell starting Exercise 2 without the targets yet "
        "(`dlogits = F.softmax(logits, 1) / n`, checked with `cmp`): an unfinished Exercise 2, "
        "not a new Exercise 1 answer",
        _cells(
            setup(),
            code(exercise1()),
            code(EXERCISE2_FORWARD),
            code("dlogits = F.softmax(logits, 1) / n\ncmp('logits', dlogits, logits)"),
        ),
        expect={f"{CE}:dlogits": "missing-branch"},
        exercises=(EX1.id, CE),
    ),
    LectureCase(
        "second_forward_copy",
        "the forward pass run again in a later cell (a copy), answers after both; a scratch "
        "line re-running one forward line in between",
        _cells(
            setup(),
            code(exercise1(skip=[s.name for s in EX1.steps[13:]], checks=False)),
            code("logit_maxes = logits.max(1, keepdim=True).values\nlogit_maxes.shape"),
            code(forward() + "\n" + BACKWARD),
            code(exercise1(skip=[s.name for s in EX1.steps[:13]], checks=False)),
        ),
        exercises=(EX1.id,),
    ),
)
"""The corpus: every structure the reader must handle."""

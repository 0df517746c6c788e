"""A corpus of answers to Exercise 1's 26 steps: slips students really make, correct spellings.

``WRONG`` holds wrong answers, each with the diagnosis code it must get first; ``RIGHT`` holds
correct answers written differently from the model answers (``Step.answer``; at least two per
step), which must pass with no diagnosis at all; ``NOTED`` holds answers that pass but carry a
note (a float64 gradient: ``dtype-mismatch``). Every answer reads only what the grader gives its
step: the forward tensors, the sizes, ``torch``, ``F`` and the step's upstream gradients.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """One answer cell for one step."""

    step: str
    code: str
    slip: str  # what the student did, in words ("" for a correct answer)
    expect: str = ""  # the code of the first diagnosis ("" for a correct answer)


def _w(step: str, expect: str, slip: str, *lines: str) -> Answer:
    return Answer(step, "\n".join(lines), slip, expect)


def _r(step: str, *lines: str) -> Answer:
    return Answer(step, "\n".join(lines), "")


ONE_HOT_MAX = "F.one_hot(logits.max(1).indices, num_classes=logits.shape[1])"

WRONG: tuple[Answer, ...] = (
    # -- dlogprobs
    _w(
        "dlogprobs",
        "hard-coded-size",
        "zeros of the lecture's shape written in",
        "dlogprobs = torch.zeros((32, 27))",
        "dlogprobs[range(n), Yb] = -1.0 / n",
    ),
    _w(
        "dlogprobs",
        "hard-coded-size",
        "the batch size written as 32",
        "dlogprobs = torch.zeros_like(logprobs)",
        "dlogprobs[range(n), Yb] = -1.0 / 32",
    ),
    _w(
        "dlogprobs",
        "wrong-scale",
        "the 1/n of the mean forgotten",
        "dlogprobs = torch.zeros_like(logprobs)",
        "dlogprobs[range(n), Yb] = -1.0",
    ),
    _w(
        "dlogprobs",
        "sign-flip",
        "the minus sign of the loss forgotten",
        "dlogprobs = torch.zeros_like(logprobs)",
        "dlogprobs[range(n), Yb] = 1.0 / n",
    ),
    _w(
        "dlogprobs",
        "hard-coded-size",
        "F.one_hot without num_classes",
        "dlogprobs = -F.one_hot(Yb).float() / n",
    ),
    # -- dprobs
    _w(
        "dprobs",
        "ignores-upstream",
        "the local derivative alone, with the wrong sign",
        "dprobs = -1 / probs",
    ),
    _w(
        "dprobs",
        "upstream-shortcut",
        "built from probs and Yb, without dlogprobs",
        "dprobs = torch.zeros_like(probs)",
        "dprobs[range(n), Yb] = -1.0 / (n * probs[range(n), Yb])",
    ),
    _w("dprobs", "sign-flip", "the derivative of log taken as -1/x", "dprobs = -dlogprobs / probs"),
    # -- dcounts_sum_inv
    _w(
        "dcounts_sum_inv",
        "shape-mismatch",
        "sum without keepdim",
        "dcounts_sum_inv = (counts * dprobs).sum(1)",
    ),
    _w(
        "dcounts_sum_inv",
        "shape-mismatch",
        "summed over the batch instead of the row",
        "dcounts_sum_inv = (counts * dprobs).sum(0, keepdim=True)",
    ),
    # -- dcounts_sum
    _w(
        "dcounts_sum",
        "sign-flip",
        "the minus sign of the power rule dropped",
        "dcounts_sum = counts_sum**-2 * dcounts_sum_inv",
    ),
    _w(
        "dcounts_sum",
        "ignores-upstream",
        "the local derivative only",
        "dcounts_sum = -counts_sum**-2",
    ),
    _w(
        "dcounts_sum",
        "error",
        "an upstream gradient of another step used",
        "dcounts_sum = -counts_sum**-2 * dprobs.sum(1, keepdim=True)",
    ),
    # -- dcounts
    _w(
        "dcounts",
        "missing-branch",
        "the path through counts_sum forgotten",
        "dcounts = counts_sum_inv * dprobs",
    ),
    _w(
        "dcounts",
        "missing-branch",
        "= where += was needed",
        "dcounts = counts_sum_inv * dprobs",
        "dcounts = torch.ones_like(counts) * dcounts_sum",
    ),
    _w(
        "dcounts",
        "sign-flip",
        "the path through counts_sum subtracted",
        "dcounts = counts_sum_inv * dprobs - dcounts_sum",
    ),
    # -- dnorm_logits
    _w(
        "dnorm_logits",
        "ignores-upstream",
        "the local derivative only",
        "dnorm_logits = counts.clone()",
    ),
    _w(
        "dnorm_logits",
        "wrong-value",
        "the derivative of exp taken as x",
        "dnorm_logits = norm_logits * dcounts",
    ),
    _w("dnorm_logits", "sign-flip", "a stray minus sign", "dnorm_logits = -counts * dcounts"),
    # -- dlogit_maxes
    _w(
        "dlogit_maxes",
        "upstream-shortcut",
        "zeros, since subtracting the max changes nothing",
        "dlogit_maxes = torch.zeros_like(logit_maxes)",
    ),
    _w(
        "dlogit_maxes",
        "sign-flip",
        "the -1 of the subtraction forgotten",
        "dlogit_maxes = dnorm_logits.sum(1, keepdim=True)",
    ),
    _w(
        "dlogit_maxes",
        "shape-mismatch",
        "sum without keepdim",
        "dlogit_maxes = -dnorm_logits.sum(1)",
    ),
    # -- dlogits
    _w(
        "dlogits",
        "missing-branch",
        "the path through logit_maxes forgotten",
        "dlogits = dnorm_logits.clone()",
    ),
    _w(
        "dlogits",
        "missing-branch",
        "= where += was needed",
        "dlogits = dnorm_logits.clone()",
        f"dlogits = {ONE_HOT_MAX} * dlogit_maxes",
    ),
    _w(
        "dlogits",
        "in-place-mutation",
        "no .clone(): dnorm_logits changed",
        "dlogits = dnorm_logits",
        f"dlogits += {ONE_HOT_MAX} * dlogit_maxes",
    ),
    _w(
        "dlogits",
        "upstream-shortcut",
        "the fused softmax-minus-one-hot formula",
        "dlogits = F.softmax(logits, 1)",
        "dlogits[range(n), Yb] -= 1",
        "dlogits /= n",
    ),
    _w(
        "dlogits",
        "upstream-shortcut",
        "the fused formula in one line",
        "dlogits = (F.softmax(logits, 1) - F.one_hot(Yb, num_classes=vocab_size)) / n",
    ),
    _w(
        "dlogits",
        "upstream-shortcut",
        "the max path sent to the target column instead of the max",
        "dlogits = dnorm_logits.clone()",
        "dlogits[range(n), Yb] += dlogit_maxes.view(-1)",
    ),
    _w(
        "dlogits",
        "hard-coded-size",
        "F.one_hot without num_classes",
        "dlogits = dnorm_logits.clone()",
        "dlogits += F.one_hot(logits.max(1).indices) * dlogit_maxes",
    ),
    _w(
        "dlogits",
        "sign-flip",
        "the path through logit_maxes subtracted",
        "dlogits = dnorm_logits.clone()",
        f"dlogits -= {ONE_HOT_MAX} * dlogit_maxes",
    ),
    _w(
        "dlogits",
        "hard-coded-size",
        "num_classes written as 27",
        "dlogits = dnorm_logits.clone()",
        "dlogits += F.one_hot(logits.max(1).indices, num_classes=27) * dlogit_maxes",
    ),
    # -- dh
    _w("dh", "error", "W2 not transposed", "dh = dlogits @ W2"),
    _w("dh", "wrong-scale", "an extra 1/n", "dh = dlogits @ W2.T / n"),
    # -- dW2
    _w("dW2", "transposed", "the factors in the wrong order", "dW2 = dlogits.T @ h"),
    _w("dW2", "wrong-scale", "averaged over the batch", "dW2 = h.T @ dlogits / n"),
    # -- db2
    _w(
        "db2",
        "shape-mismatch",
        "keepdim on a one-dimensional bias",
        "db2 = dlogits.sum(0, keepdim=True)",
    ),
    _w("db2", "shape-mismatch", "summed over the wrong dimension", "db2 = dlogits.sum(1)"),
    _w("db2", "wrong-scale", "a mean instead of a sum", "db2 = dlogits.mean(0)"),
    # -- dhpreact
    _w(
        "dhpreact",
        "wrong-value",
        "tanh's derivative written with hpreact instead of h",
        "dhpreact = (1.0 - hpreact**2) * dh",
    ),
    _w("dhpreact", "ignores-upstream", "the local derivative only", "dhpreact = 1.0 - h**2"),
    # -- dbngain
    _w("dbngain", "shape-mismatch", "sum without keepdim", "dbngain = (bnraw * dhpreact).sum(0)"),
    _w("dbngain", "shape-mismatch", "the broadcast never summed", "dbngain = bnraw * dhpreact"),
    # -- dbnbias
    _w("dbnbias", "shape-mismatch", "sum without keepdim", "dbnbias = dhpreact.sum(0)"),
    _w(
        "dbnbias",
        "wrong-scale",
        "a mean instead of a sum",
        "dbnbias = dhpreact.mean(0, keepdim=True)",
    ),
    # -- dbnraw
    _w("dbnraw", "sign-flip", "a stray minus sign", "dbnraw = -bngain * dhpreact"),
    _w(
        "dbnraw",
        "shape-mismatch",
        "summed although bnraw was not broadcast",
        "dbnraw = (bngain * dhpreact).sum(0, keepdim=True)",
    ),
    # -- dbnvar_inv
    _w(
        "dbnvar_inv",
        "shape-mismatch",
        "sum without keepdim",
        "dbnvar_inv = (bndiff * dbnraw).sum(0)",
    ),
    _w(
        "dbnvar_inv",
        "wrong-value",
        "bnraw used as the local derivative instead of bndiff",
        "dbnvar_inv = (bnraw * dbnraw).sum(0, keepdim=True)",
    ),
    # -- dbnvar
    _w(
        "dbnvar",
        "sign-flip",
        "the minus sign of the power rule dropped",
        "dbnvar = 0.5 * (bnvar + 1e-5)**-1.5 * dbnvar_inv",
    ),
    _w(
        "dbnvar",
        "wrong-value",
        "the exponent not lowered by one",
        "dbnvar = -0.5 * (bnvar + 1e-5)**-0.5 * dbnvar_inv",
    ),
    # -- dbndiff2
    _w(
        "dbndiff2",
        "wrong-scale",
        "1/n for Bessel's 1/(n-1)",
        "dbndiff2 = (1.0 / n) * torch.ones_like(bndiff2) * dbnvar",
    ),
    _w(
        "dbndiff2",
        "hard-coded-size",
        "n-1 written as 31",
        "dbndiff2 = (1.0 / 31) * torch.ones_like(bndiff2) * dbnvar",
    ),
    _w(
        "dbndiff2",
        "wrong-scale",
        "the 1/(n-1) forgotten",
        "dbndiff2 = torch.ones_like(bndiff2) * dbnvar",
    ),
    # -- dbndiff
    _w(
        "dbndiff",
        "missing-branch",
        "the path through bndiff2 forgotten",
        "dbndiff = bnvar_inv * dbnraw",
    ),
    _w(
        "dbndiff",
        "missing-branch",
        "= where += was needed",
        "dbndiff = bnvar_inv * dbnraw",
        "dbndiff = (2 * bndiff) * dbndiff2",
    ),
    _w(
        "dbndiff",
        "wrong-scale",
        "the 2 of the square's derivative forgotten",
        "dbndiff = bnvar_inv * dbnraw + bndiff * dbndiff2",
    ),
    # -- dbnmeani
    _w("dbnmeani", "shape-mismatch", "sum without keepdim", "dbnmeani = (-dbndiff).sum(0)"),
    _w(
        "dbnmeani",
        "sign-flip",
        "the -1 of the subtraction forgotten",
        "dbnmeani = dbndiff.sum(0, keepdim=True)",
    ),
    # -- dhprebn
    _w(
        "dhprebn",
        "missing-branch",
        "the path through the mean forgotten",
        "dhprebn = dbndiff.clone()",
    ),
    _w(
        "dhprebn",
        "in-place-mutation",
        "no .clone(): dbndiff changed",
        "dhprebn = dbndiff",
        "dhprebn += 1.0 / n * dbnmeani",
    ),
    _w("dhprebn", "wrong-scale", "the 1/n of the mean forgotten", "dhprebn = dbndiff + dbnmeani"),
    _w(
        "dhprebn",
        "wrong-scale",
        "the mean's 1/n taken as 1/(n-1)",
        "dhprebn = dbndiff + dbnmeani / (n - 1)",
    ),
    _w("dhprebn", "hard-coded-size", "n written as 32", "dhprebn = dbndiff + dbnmeani / 32"),
    # -- dembcat
    _w("dembcat", "error", "W1 not transposed", "dembcat = dhprebn @ W1"),
    _w("dembcat", "transposed", "the transposed product", "dembcat = W1 @ dhprebn.T"),
    # -- dW1
    _w("dW1", "transposed", "the factors in the wrong order", "dW1 = dhprebn.T @ embcat"),
    _w("dW1", "wrong-scale", "averaged over the batch", "dW1 = embcat.T @ dhprebn / n"),
    # -- db1
    _w(
        "db1",
        "upstream-shortcut",
        "zeros, since batch norm removes the mean",
        "db1 = torch.zeros_like(b1)",
    ),
    _w("db1", "sign-flip", "a stray minus sign", "db1 = -dhprebn.sum(0)"),
    _w(
        "db1",
        "shape-mismatch",
        "keepdim on a one-dimensional bias",
        "db1 = dhprebn.sum(0, keepdim=True)",
    ),
    # -- demb
    _w(
        "demb",
        "hard-coded-size",
        "the lecture's sizes written into the view",
        "demb = dembcat.view(32, 3, 10)",
    ),
    _w("demb", "shape-mismatch", "the view not undone", "demb = dembcat"),
    _w(
        "demb",
        "shape-mismatch",
        "the last two sizes swapped",
        "demb = dembcat.view(n, n_embd, block_size)",
    ),
    # -- dC
    _w("dC", "uses-autograd", "autograd's gradient pasted in", "dC = C.grad"),
    _w(
        "db2",
        "tampering",
        "the right answer behind a look at the process",
        "import os",
        "os.getpid()",
        "db2 = dlogits.sum(0)",
    ),
    _w(
        "dW2",
        "error",
        "the grader's own tensors fished out of the interpreter (refused; tampering too)",
        "import gc",
        "dW2 = next(o for o in gc.get_objects() if isinstance(o, torch.Tensor)"
        " and o.shape == W2.shape and o is not W2)",
    ),
    _w(
        "dC",
        "scatter-drops-duplicates",
        "an indexed += with repeated rows",
        "dC = torch.zeros_like(C)",
        "dC[Xb] += demb",
    ),
    _w(
        "dC",
        "scatter-drops-duplicates",
        "= where += was needed in the loop",
        "dC = torch.zeros_like(C)",
        "for k in range(Xb.shape[0]):",
        "    for j in range(Xb.shape[1]):",
        "        dC[Xb[k, j]] = demb[k, j]",
    ),
    _w(
        "dC",
        "missing-branch",
        "the loop stops one position short",
        "dC = torch.zeros_like(C)",
        "for k in range(Xb.shape[0]):",
        "    for j in range(Xb.shape[1] - 1):",
        "        dC[Xb[k, j]] += demb[k, j]",
    ),
    _w(
        "dC",
        "missing-branch",
        "the loop stops one example short",
        "dC = torch.zeros_like(C)",
        "for k in range(Xb.shape[0] - 1):",
        "    for j in range(Xb.shape[1]):",
        "        dC[Xb[k, j]] += demb[k, j]",
    ),
    _w(
        "dC",
        "hard-coded-size",
        "n_embd written as 10",
        "dC = torch.zeros_like(C)",
        "dC.index_add_(0, Xb.view(-1), demb.view(-1, 10))",
    ),
    _w(
        "dC",
        "hard-coded-size",
        "the table's shape written in",
        "dC = torch.zeros((27, 10))",
        "dC.index_add_(0, Xb.flatten(), demb.flatten(0, 1))",
    ),
)
"""Wrong answers, each with the code its first diagnosis must have."""

RIGHT: tuple[Answer, ...] = (
    _r(
        "dlogprobs",
        "dlogprobs = torch.zeros_like(logprobs)",
        "dlogprobs[torch.arange(n), Yb] = -1 / n",
    ),
    _r("dlogprobs", "dlogprobs = -F.one_hot(Yb, num_classes=logprobs.shape[1]).float() / n"),
    _r(
        "dlogprobs",
        "dlogprobs = torch.zeros((n, vocab_size))",
        "dlogprobs[range(n), Yb] -= 1.0 / n",
    ),
    _r(
        "dlogprobs",
        "dlogprobs = torch.zeros_like(logprobs)",
        "dlogprobs[range(batch_size), Yb] = -1.0 / batch_size",
    ),
    _r(
        "dhpreact",
        "class Tanh:  # a layer of one's own, micrograd style",
        "    def __init__(self, out):",
        "        self.out = out",
        "    def backward(self, dout):",
        "        return (1.0 - self.out**2) * dout",
        "dhpreact = Tanh(h).backward(dh)",
    ),
    _r("dprobs", "dprobs = dlogprobs / probs"),
    _r("dh", "backward = dlogits @ W2.T  # a temporary's name, not autograd's", "dh = backward"),
    _r("dprobs", "dprobs = probs**-1 * dlogprobs"),
    _r("dprobs", "dprobs = dlogprobs * probs.reciprocal()"),
    _r("dcounts_sum_inv", "dcounts_sum_inv = (dprobs * counts).sum(dim=1, keepdim=True)"),
    _r("dcounts_sum_inv", "dcounts_sum_inv = torch.sum(counts * dprobs, 1, keepdim=True)"),
    _r("dcounts_sum_inv", "dcounts_sum_inv = (counts * dprobs) @ torch.ones(counts.shape[1], 1)"),
    _r("dcounts_sum", "dcounts_sum = -dcounts_sum_inv / counts_sum**2"),
    _r("dcounts_sum", "dcounts_sum = dcounts_sum_inv * (-1.0 / (counts_sum * counts_sum))"),
    _r("dcounts", "dcounts = counts_sum_inv * dprobs + dcounts_sum"),
    _r(
        "dcounts",
        "dcounts = dprobs * counts_sum_inv",
        "dcounts = dcounts + dcounts_sum.expand_as(counts)",
    ),
    _r("dnorm_logits", "dnorm_logits = norm_logits.exp() * dcounts"),
    _r("dnorm_logits", "dnorm_logits = dcounts * counts"),
    _r("dlogit_maxes", "dlogit_maxes = -dnorm_logits.sum(1, keepdim=True)"),
    _r("dlogit_maxes", "dlogit_maxes = -torch.sum(dnorm_logits, dim=1, keepdim=True)"),
    _r("dlogit_maxes", "dlogit_maxes = (dnorm_logits * -1).sum(1).view(-1, 1)"),
    _r(
        "dlogits",
        "dlogits = dnorm_logits + F.one_hot(logits.argmax(1), logits.shape[1]) * dlogit_maxes",
    ),
    _r(
        "dlogits",
        "dlogits = dnorm_logits.clone()",
        "dlogits[range(n), logits.argmax(1)] += dlogit_maxes.view(-1)",
    ),
    _r("dlogits", "dlogits = dnorm_logits + (logits == logit_maxes).float() * dlogit_maxes"),
    _r("dh", "dh = dlogits @ W2.t()"),
    _r("dh", "dh = torch.matmul(dlogits, W2.transpose(0, 1))"),
    _r("dh", "dh = (W2 @ dlogits.T).T"),
    _r("dh", "grad = dlogits", "dh = grad @ W2.T"),
    _r("dW2", "dW2 = (dlogits.T @ h).T"),
    _r("dW2", "dW2 = torch.einsum('ni,nj->ij', h, dlogits)"),
    _r("db2", "db2 = dlogits.sum(0, keepdim=True).squeeze(0)"),
    _r("db2", "db2 = torch.sum(dlogits, dim=0)"),
    _r("db2", "db2 = dlogits.T @ torch.ones(n)"),
    _r("dhpreact", "dhpreact = (1 - torch.tanh(hpreact)**2) * dh"),
    _r("dhpreact", "dhpreact = dh * (1 - h * h)"),
    _r("dbngain", "dbngain = torch.sum(bnraw * dhpreact, dim=0, keepdim=True)"),
    _r("dbngain", "dbngain = (dhpreact * bnraw).sum(0).view(1, -1)"),
    _r("dbnbias", "dbnbias = dhpreact.sum(0).unsqueeze(0)"),
    _r("dbnbias", "dbnbias = torch.ones(1, n) @ dhpreact"),
    _r("dbnraw", "dbnraw = dhpreact * bngain"),
    _r("dbnraw", "dbnraw = bngain.expand_as(dhpreact) * dhpreact"),
    _r("dbnvar_inv", "dbnvar_inv = (dbnraw * bndiff).sum(0, keepdim=True)"),
    _r("dbnvar_inv", "dbnvar_inv = torch.einsum('ij,ij->j', bndiff, dbnraw).unsqueeze(0)"),
    _r("dbnvar", "dbnvar = -0.5 * (bnvar + 1e-5)**(-3 / 2) * dbnvar_inv"),
    _r("dbnvar", "dbnvar = -0.5 * bnvar_inv**3 * dbnvar_inv"),
    _r("dbndiff2", "dbndiff2 = dbnvar.expand_as(bndiff2) / (n - 1)"),
    _r("dbndiff2", "dbndiff2 = torch.ones_like(bndiff2) * dbnvar * (1.0 / (bndiff2.shape[0] - 1))"),
    _r("dbndiff", "dbndiff = bnvar_inv * dbnraw + 2 * bndiff * dbndiff2"),
    _r("dbndiff", "dbndiff = (2 * bndiff) * dbndiff2", "dbndiff += dbnraw * bnvar_inv"),
    _r("dbnmeani", "dbnmeani = -dbndiff.sum(0, keepdim=True)"),
    _r("dbnmeani", "dbnmeani = -torch.ones(1, n) @ dbndiff"),
    _r("dhprebn", "dhprebn = dbndiff + dbnmeani / n"),
    _r("dhprebn", "dhprebn = dbndiff.clone()", "dhprebn += dbnmeani.expand_as(hprebn) / n"),
    _r("dembcat", "dembcat = dhprebn @ W1.t()"),
    _r("dembcat", "dembcat = torch.mm(dhprebn, W1.T)"),
    _r("dW1", "dW1 = embcat.t() @ dhprebn"),
    _r("dW1", "dW1 = torch.einsum('nk,nh->kh', embcat, dhprebn)"),
    _r("db1", "db1 = dhprebn.sum(dim=0)"),
    _r("db1", "db1 = torch.ones(n) @ dhprebn"),
    _r("demb", "demb = dembcat.view(n, block_size, n_embd)"),
    _r("demb", "demb = dembcat.reshape(emb.shape)"),
    _r("demb", "demb = dembcat.view(-1, block_size, n_embd)"),
    _r("demb", "demb = dembcat.view(batch_size, block_size, n_embd)  # the lecture's n"),
    _r(
        "dC",
        "dC = torch.zeros_like(C)",
        "for i, ix in enumerate(Xb.view(-1)):",
        "    dC[ix] += demb.view(-1, n_embd)[i]",
    ),
    _r("dC", "dC = torch.zeros_like(C)", "dC.index_add_(0, Xb.view(-1), demb.view(-1, n_embd))"),
    _r(
        "dC",
        "dC = F.one_hot(Xb.view(-1), num_classes=C.shape[0]).float().T @ demb.view(-1, C.shape[1])",
    ),
    _r("dC", "dC = torch.zeros_like(C)", "dC.index_put_((Xb,), demb, accumulate=True)"),
)
"""Correct answers spelled otherwise than the model solution: they pass with no diagnosis."""

NOTED: tuple[Answer, ...] = (
    _w("dprobs", "dtype-mismatch", "computed in float64", "dprobs = dlogprobs.double() / probs"),
    _w("dW2", "dtype-mismatch", "computed in float64", "dW2 = h.T.double() @ dlogits.double()"),
)
"""Correct answers that pass with a note: the code of their only diagnosis."""


ALL: tuple[Answer, ...] = WRONG + RIGHT + NOTED
"""Every answer of the corpus."""

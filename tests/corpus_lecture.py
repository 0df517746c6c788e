"""Corpora of Exercises 2-4: correct spellings and the slips students make, with the diagnosis
each slip must get first (as :mod:`tests.corpus` does for Exercise 1).

Every answer reads only what the grader gives its step: the forward tensors of the lecture's
Exercises 2-4 (``bnmean``, ``bnvar``, ``bnvar_inv``, ``bnraw``...), the sizes, ``torch``, ``F``
and the step's upstream gradients.
"""

from __future__ import annotations

from .corpus import Answer

UPDATE = "for p, grad in zip(parameters, grads):\n"


def _w(exercise: str, step: str, expect: str, slip: str, *lines: str) -> tuple[str, Answer]:
    return exercise, Answer(step, "\n".join(lines), slip, expect)


def _r(exercise: str, step: str, *lines: str) -> tuple[str, Answer]:
    return exercise, Answer(step, "\n".join(lines), "")


CE, BN, MT = "cross_entropy_backward", "batchnorm_backward", "manual_training"

WRONG: tuple[tuple[str, Answer], ...] = (
    # -- Exercise 2: dlogits of F.cross_entropy
    _w(CE, "dlogits", "wrong-scale", "the 1/n of the mean forgotten",
       "dlogits = F.softmax(logits, 1)", "dlogits[range(n), Yb] -= 1"),
    _w(CE, "dlogits", "missing-branch", "softmax without subtracting the one-hot",
       "dlogits = F.softmax(logits, 1) / n"),
    _w(CE, "dlogits", "sign-flip", "one-hot minus softmax",
       "dlogits = -F.softmax(logits, 1)", "dlogits[range(n), Yb] += 1", "dlogits /= n"),
    _w(CE, "dlogits", "wrong-value", "softmax over the wrong dimension",
       "dlogits = F.softmax(logits, 0)", "dlogits[range(n), Yb] -= 1", "dlogits /= n"),
    _w(CE, "dlogits", "wrong-value", "softmax without subtracting the row maximum",
       "counts = logits.exp()", "dlogits = counts / counts.sum(1, keepdim=True)",
       "dlogits[range(n), Yb] -= 1", "dlogits /= n"),
    _w(CE, "dlogits", "error", "a sum that drops its dimension, then broadcasts wrongly",
       "counts = (logits - logits.max(1, keepdim=True).values).exp()",
       "dlogits = counts / counts.sum(1)", "dlogits[range(n), Yb] -= 1", "dlogits /= n"),
    _w(CE, "dlogits", "hard-coded-size", "the batch size written as 32",
       "dlogits = F.softmax(logits, 1)", "dlogits[range(32), Yb] -= 1", "dlogits /= 32"),
    _w(CE, "dlogits", "hard-coded-size", "F.one_hot without num_classes",
       "dlogits = (F.softmax(logits, 1) - F.one_hot(Yb)) / n"),
    _w(CE, "dlogits", "uses-autograd", "the gradient taken from autograd", "dlogits = logits.grad"),
    # -- Exercise 3: dhprebn of the batch norm
    _w(BN, "dhprebn", "wrong-scale", "n where Bessel's n-1 belongs in the variance part",
       "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0)"
       " - bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "wrong-scale", "n-1 where n belongs (the whole gradient divided by n-1)",
       "dhprebn = bngain * bnvar_inv / (n - 1) * (n * dhpreact - dhpreact.sum(0)"
       " - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "missing-branch", "the part through the mean forgotten",
       "dhprebn = bngain * bnvar_inv / n * (n * dhpreact"
       " - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "missing-branch", "the part through the variance forgotten",
       "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0))"),
    _w(BN, "dhprebn", "sign-flip", "the variance part added instead of subtracted",
       "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0)"
       " + n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "wrong-scale", "bngain left out",
       "dhprebn = bnvar_inv / n * (n * dhpreact - dhpreact.sum(0)"
       " - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "wrong-value", "the epsilon dropped",
       "dhprebn = bngain * bnvar**-0.5 / n * (n * dhpreact - dhpreact.sum(0)"
       " - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "hard-coded-size", "the batch size written as 32",
       "dhprebn = bngain * bnvar_inv / 32 * (32 * dhpreact - dhpreact.sum(0)"
       " - 32 / 31 * bnraw * (dhpreact * bnraw).sum(0))"),
    _w(BN, "dhprebn", "shape-mismatch", "a sum over the batch kept as the answer",
       "dhprebn = (bngain * bnvar_inv * dhpreact).sum(0)"),
    # -- Exercise 4: the gradients and the update
    _w(MT, "dlogits", "missing-branch", "softmax without subtracting the one-hot",
       "dlogits = F.softmax(logits, 1) / n"),
    _w(MT, "dhprebn", "missing-branch", "the part through the variance forgotten",
       "dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0))"),
    _w(MT, "dbngain", "shape-mismatch", "keepdim forgotten",
       "dbngain = (bnraw * dhpreact).sum(0)"),
    _w(MT, "db2", "shape-mismatch", "keepdim where the bias has one dimension",
       "db2 = dlogits.sum(0, keepdim=True)"),
    _w(MT, "dW1", "transposed", "the factors of the product swapped",
       "dW1 = dhprebn.T @ embcat"),
    _w(MT, "dhpreact", "wrong-value", "the derivative of tanh taken as 1 - hpreact**2",
       "dhpreact = (1.0 - hpreact**2) * dh"),
    _w(MT, "dC", "scatter-drops-duplicates", "the fancy-index scatter",
       "dC = torch.zeros_like(C)", "dC[Xb] += demb"),
    _w(MT, "dC", "error", "the gradient of C carried over instead of reset",
       "dC += torch.zeros_like(C).index_add_(0, Xb.view(-1), demb.view(-1, demb.shape[2]))"),
    _w(MT, "dC", "not-reset", "the table's gradient kept from the previous iteration",
       "try:", "    dC", "except NameError:", "    dC = torch.zeros_like(C)",
       "dC.index_add_(0, Xb.view(-1), demb.view(-1, demb.shape[2]))"),
    _w(MT, "demb", "hard-coded-size", "the view written with the lecture's sizes",
       "demb = dembcat.view(32, 3, 10)"),
    _w(MT, "update", "update-sign", "the update applied up the gradient",
       UPDATE + "    p.data += lr * grad"),
    _w(MT, "update", "update-missing", "a copy updated instead of the parameter",
       UPDATE + "    p = p - lr * grad"),
    _w(MT, "update", "update-scale", "twice the learning rate",
       UPDATE + "    p.data -= 2 * lr * grad"),
    _w(MT, "update", "update-parameter", "every parameter updated with the first gradient",
       UPDATE + "    p.data -= lr * grads[0] if p.shape == grads[0].shape else 0 * p"),
    _w(MT, "update", "update-parameter", "half the learning rate for the table only",
       UPDATE + "    p.data -= (lr / 2 if p.shape == C.shape else lr) * grad"),
    _w(MT, "update", "update-parameter", "b1 left out (its true gradient is about 0)",
       "for p, grad in zip(parameters[:2] + parameters[3:], grads[:2] + grads[3:]):",
       "    p.data -= lr * grad"),
    _w(MT, "update", "update-parameter", "each gradient taken in the other order",
       "for p, grad in zip(parameters, reversed(grads)):",
       "    if p.shape == grad.shape:", "        p.data -= lr * grad"),
    _w(MT, "update", "update-parameter", "weight decay as well (5e-4)",
       UPDATE + "    p.data += -lr * (grad + 5e-4 * p.data)"),
    _w(MT, "update", "update-parameter", "a learning rate divided by the batch size",
       UPDATE + "    p.data += -lr / n * grad"),
    _w(MT, "update", "wrong-value", "a momentum buffer kept across iterations",
       "try:", "    velocity", "except NameError:",
       "    velocity = [torch.zeros_like(p) for p in parameters]",
       "for p, grad, v in zip(parameters, grads, velocity):",
       "    v.mul_(0.9).add_(grad)", "    p.data -= lr * v"),
)  # fmt: skip
"""Slips in Exercises 2-4, each with its expected first diagnosis code."""

RIGHT: tuple[tuple[str, Answer], ...] = (
    _r(CE, "dlogits", "onehot = F.one_hot(Yb, num_classes=logits.shape[1])",
       "dlogits = (F.softmax(logits, 1) - onehot) / n"),
    _r(CE, "dlogits", "p = (logits - logits.max(1, keepdim=True).values).exp()",
       "p = p / p.sum(1, keepdim=True)", "p[range(n), Yb] -= 1", "dlogits = p / n"),
    _r(CE, "dlogits", "dlogits = F.softmax(logits, dim=1)",
       "dlogits[torch.arange(logits.shape[0]), Yb] -= 1.0", "dlogits = dlogits / logits.shape[0]"),
    _r(BN, "dhprebn", "dhprebn = bngain * bnvar_inv / n * (n * dhpreact"
       " - dhpreact.sum(0, keepdim=True) - n / (n - 1) * bnraw"
       " * (dhpreact * bnraw).sum(0, keepdim=True))"),
    _r(BN, "dhprebn", "dbnraw = bngain * dhpreact",
       "dhprebn = bnvar_inv / n * (n * dbnraw - dbnraw.sum(0) - n / (n - 1) * bnraw"
       " * (dbnraw * bnraw).sum(0))"),
    _r(BN, "dhprebn", "xhat = (hprebn - bnmean) * bnvar_inv",
       "g = bngain * dhpreact",
       "dhprebn = bnvar_inv * (g - g.mean(0, keepdim=True)"
       " - xhat * (g * xhat).sum(0, keepdim=True) / (n - 1))"),
    _r(MT, "dC", "dC = torch.zeros_like(C)", "for k in range(Xb.shape[0]):",
       "    for j in range(Xb.shape[1]):", "        dC[Xb[k, j]] += demb[k, j]"),
    _r(MT, "dbngain", "x = (hpreact - bnbias).div(bngain)",
       "dbngain = (x * dhpreact).sum(0, keepdim=True)"),
    _r(MT, "update", "for p, grad in zip(parameters, grads):", "    p.data -= lr * grad"),
    _r(MT, "update", "for p, grad in zip(parameters, grads):", "    p.grad = None",
       "    p.data += -lr * grad"),
    _r(MT, "update", "with torch.set_grad_enabled(False):",
       "    for p, grad in zip(parameters, grads):", "        p -= lr * grad"),
    _r(MT, "update", "for i in range(len(parameters)):",
       "    parameters[i].data.add_(grads[i], alpha=-lr)"),
    _r(MT, "update", "for p, grad in zip(parameters, grads):", "    p.data += -lr * grad",
       "print(f'loss {loss.item():.4f}')"),  # the loss exists when the update runs
    _r(MT, "update", "C.data -= lr * dC", "W1.data -= lr * dW1", "b1.data -= lr * db1",
       "W2.data -= lr * dW2", "b2.data -= lr * db2", "bngain.data -= lr * dbngain",
       "bnbias.data -= lr * dbnbias"),  # each parameter by its name, no parameters or grads
    _r(MT, "update", "lr = 0.1 if i < 100000 else 0.01",  # the lecture's decay, by its loop's i
       "for p, grad in zip(parameters, grads):", "    p.data += -lr * grad"),
    _r(MT, "dC", "def scatter(dC, rows, values):",  # a helper defined before the reset
       "    dC.index_add_(0, rows.view(-1), values.view(-1, values.shape[-1]))",
       "    return dC", "dC = scatter(torch.zeros_like(C), Xb, demb)"),
    _r(MT, "dlogits", "dlogits = F.softmax(logits, 1)", "dlogits[range(n), Yb] -= 1",
       "dlogits /= batch_size"),
)  # fmt: skip
"""Correct answers of Exercises 2-4 spelled otherwise than the model answers."""

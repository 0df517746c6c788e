"""The model answer of every step, as the notebook's solution cells hold it.

This is instructor material: the source notebook's solution regions are generated from it, and the
kit's tests grade it. Each answer reads only what the grader supplies for that step (see
:meth:`autograder.cases.Case.inputs`) and is written in the lecture's style.
"""

from __future__ import annotations

SOLUTIONS: dict[str, str] = {
    "dlogprobs": ("dlogprobs = torch.zeros_like(logprobs)\ndlogprobs[range(n), Yb] = -1.0 / n"),
    "dprobs": "dprobs = (1.0 / probs) * dlogprobs",
    "dcounts_sum_inv": "dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)",
    "dcounts_sum": "dcounts_sum = (-counts_sum**-2) * dcounts_sum_inv",
    "dcounts": (
        "dcounts = counts_sum_inv * dprobs\ndcounts += torch.ones_like(counts) * dcounts_sum"
    ),
    "dnorm_logits": "dnorm_logits = counts * dcounts",
    "dlogit_maxes": "dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)",
    "dlogits": (
        "dlogits = dnorm_logits.clone()\n"
        "dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes"
    ),
    "dh": "dh = dlogits @ W2.T",
    "dW2": "dW2 = h.T @ dlogits",
    "db2": "db2 = dlogits.sum(0)",
    "dhpreact": "dhpreact = (1.0 - h**2) * dh",
    "dbngain": "dbngain = (bnraw * dhpreact).sum(0, keepdim=True)",
    "dbnbias": "dbnbias = dhpreact.sum(0, keepdim=True)",
    "dbnraw": "dbnraw = bngain * dhpreact",
    "dbnvar_inv": "dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)",
    "dbnvar": "dbnvar = (-0.5 * (bnvar + 1e-5)**-1.5) * dbnvar_inv",
    "dbndiff2": "dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar",
    "dbndiff": ("dbndiff = bnvar_inv * dbnraw\ndbndiff += (2 * bndiff) * dbndiff2"),
    "dbnmeani": "dbnmeani = (-dbndiff).sum(0, keepdim=True)",
    "dhprebn": (
        "dhprebn = dbndiff.clone()\ndhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)"
    ),
    "dembcat": "dembcat = dhprebn @ W1.T",
    "dW1": "dW1 = embcat.T @ dhprebn",
    "db1": "db1 = dhprebn.sum(0)",
    "demb": "demb = dembcat.view(emb.shape)",
    "dC": (
        "dC = torch.zeros_like(C)\n"
        "for k in range(Xb.shape[0]):\n"
        "    for j in range(Xb.shape[1]):\n"
        "        ix = Xb[k, j]\n"
        "        dC[ix] += demb[k, j]"
    ),
}

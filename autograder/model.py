"""The character-level MLP of the lecture: sizes, parameters and the atomic forward pass.

``OPS`` holds one function per line of :data:`autograder.catalog.FORWARD`, so the same code runs the
whole forward pass (:func:`forward`) and re-evaluates a single line with its other inputs held
fixed, which is how :mod:`autograder.references` builds local vector-Jacobian products.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .catalog import DATA, FORWARD, PARAMETERS, SIZES

Tensors = dict[str, Any]
"""A namespace of the graph: tensor values by name, plus the integer sizes (``n`` and friends)."""

LECTURE_SEED = 2147483647
"""The seed of the lecture's generator."""

REPO_ROOT = Path(__file__).resolve().parent.parent
LECTURE_BATCH = REPO_ROOT / "data" / "lecture_batch.json"
"""Committed fixture: the lecture's batch ``Xb``, ``Yb`` and the seed that drew it."""


@dataclass(frozen=True)
class Config:
    """Sizes of the network and the batch (the lecture's by default)."""

    vocab_size: int = 27
    block_size: int = 3
    n_embd: int = 10
    n_hidden: int = 64
    batch_size: int = 32

    def sizes(self) -> dict[str, int]:
        """The integers a step's namespace holds (see :data:`autograder.catalog.SIZES`)."""
        return {
            "n": self.batch_size,
            "vocab_size": self.vocab_size,
            "block_size": self.block_size,
            "n_embd": self.n_embd,
            "n_hidden": self.n_hidden,
        }

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


LECTURE = Config()


def init_params(cfg: Config, g: torch.Generator) -> Tensors:
    """Parameters as in the lecture, all drawn from ``g`` (bngain and bnbias too).

    None is 0 or 1: b1, b2 and bnbias are small random values and bngain is ``1 + 0.1 * N(0, 1)``,
    because exact zeros and ones hide wrong answers (a missing ``bngain *`` factor, say).
    """
    fan_in = cfg.n_embd * cfg.block_size
    return {
        "C": torch.randn((cfg.vocab_size, cfg.n_embd), generator=g),
        "W1": torch.randn((fan_in, cfg.n_hidden), generator=g) * (5 / 3) / fan_in**0.5,
        "b1": torch.randn(cfg.n_hidden, generator=g) * 0.1,
        "W2": torch.randn((cfg.n_hidden, cfg.vocab_size), generator=g) * 0.1,
        "b2": torch.randn(cfg.vocab_size, generator=g) * 0.1,
        "bngain": torch.randn((1, cfg.n_hidden), generator=g) * 0.1 + 1.0,
        "bnbias": torch.randn((1, cfg.n_hidden), generator=g) * 0.1,
    }


# One function per forward line; t holds the graph so far. Shapes with the lecture's sizes:
# n=32, block_size=3, n_embd=10, n_hidden=64, vocab_size=27.
OPS: dict[str, Callable[[Mapping[str, Any]], torch.Tensor]] = {
    "emb": lambda t: t["C"][t["Xb"]],  # (32, 3, 10)
    "embcat": lambda t: t["emb"].view(t["emb"].shape[0], -1),  # (32, 30)
    "hprebn": lambda t: t["embcat"] @ t["W1"] + t["b1"],  # (32, 30) @ (30, 64) -> (32, 64)
    "bnmeani": lambda t: 1 / t["n"] * t["hprebn"].sum(0, keepdim=True),  # (1, 64)
    "bndiff": lambda t: t["hprebn"] - t["bnmeani"],  # (32, 64)
    "bndiff2": lambda t: t["bndiff"] ** 2,  # (32, 64)
    "bnvar": lambda t: 1 / (t["n"] - 1) * t["bndiff2"].sum(0, keepdim=True),  # (1, 64)
    "bnvar_inv": lambda t: (t["bnvar"] + 1e-5) ** -0.5,  # (1, 64)
    "bnraw": lambda t: t["bndiff"] * t["bnvar_inv"],  # (32, 64)
    "hpreact": lambda t: t["bngain"] * t["bnraw"] + t["bnbias"],  # (32, 64)
    "h": lambda t: torch.tanh(t["hpreact"]),  # (32, 64)
    "logits": lambda t: t["h"] @ t["W2"] + t["b2"],  # (32, 64) @ (64, 27) -> (32, 27)
    "logit_maxes": lambda t: t["logits"].max(1, keepdim=True).values,  # (32, 1)
    "norm_logits": lambda t: t["logits"] - t["logit_maxes"],  # (32, 27)
    "counts": lambda t: t["norm_logits"].exp(),  # (32, 27)
    "counts_sum": lambda t: t["counts"].sum(1, keepdims=True),  # (32, 1)
    "counts_sum_inv": lambda t: t["counts_sum"] ** -1,  # (32, 1)
    "probs": lambda t: t["counts"] * t["counts_sum_inv"],  # (32, 27)
    "logprobs": lambda t: t["probs"].log(),  # (32, 27)
    "loss": lambda t: -t["logprobs"][range(t["n"]), t["Yb"]].mean(),  # ()
}
if tuple(OPS) != tuple(var for var, _ in FORWARD):  # pragma: no cover - guards edits
    raise RuntimeError("model.OPS must follow catalog.FORWARD line for line")


def forward(params: Mapping[str, torch.Tensor], Xb: torch.Tensor, Yb: torch.Tensor) -> Tensors:
    """Run the forward pass; returns the whole graph: sizes, data, parameters and every line."""
    vocab_size, n_embd = params["C"].shape
    t: Tensors = {
        "n": Xb.shape[0],
        "vocab_size": int(vocab_size),
        "block_size": Xb.shape[1],
        "n_embd": int(n_embd),
        "n_hidden": params["W1"].shape[1],
        "Xb": Xb,
        "Yb": Yb,
        **params,
    }
    for var, op in OPS.items():
        t[var] = op(t)
    return t


def true_gradients(graph: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Gradients of the loss for every variable of ``graph``, by autograd through the whole pass.

    This is what the notebook's visible checks compare with; values keep ``graph``'s dtype.
    """
    names = [var for var, _ in FORWARD if var != "loss"]
    params = {k: graph[k].detach().clone().requires_grad_() for k in PARAMETERS}
    t: Tensors = {k: graph[k] for k in (*SIZES, *DATA)}
    t.update(params)
    with torch.enable_grad():
        for var, op in OPS.items():
            t[var] = op(t)
            if var != "loss":
                t[var].retain_grad()
        t["loss"].backward()
    grads = {"d" + k: t[k].grad.detach() for k in names}
    grads.update({"d" + k: p.grad.detach() for k, p in params.items()})
    return grads


def load_lecture_batch(path: Path = LECTURE_BATCH) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The lecture batch ``(Xb, Yb, seed)`` from the committed fixture (names.txt not needed)."""
    data = json.loads(path.read_text())
    Xb = torch.tensor(data["Xb"], dtype=torch.int64)  # (32, 3)
    Yb = torch.tensor(data["Yb"], dtype=torch.int64)  # (32,)
    return Xb, Yb, int(data["seed"])


def lecture_graph() -> Tensors:
    """The lecture configuration: parameters from the seeded generator, then the fixture batch."""
    Xb, Yb, seed = load_lecture_batch()
    g = torch.Generator().manual_seed(seed)
    params = init_params(LECTURE, g)
    return forward(params, Xb, Yb)

"""The lecture's dataset pipeline: names -> vocabulary -> contexts of ``block_size`` characters.

Vocabulary: '.' is 0 and marks both the start and the end of a name; the letters follow in sorted
order. Each name yields one example per character plus the closing '.', whose context is the
``block_size`` previous characters (padded with '.'). The words are shuffled with
``random.seed(42)`` and split 80/10/10 into train, dev and test, as in the lecture.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.model import LECTURE_BATCH, init_params
from ..exercises.definition import LECTURE, Config
from ..exercises.mlp import LECTURE_SEED


@dataclass(frozen=True)
class Vocabulary:
    """Characters and their indices, '.' first."""

    itos: tuple[str, ...]

    @classmethod
    def from_words(cls, words: list[str]) -> Vocabulary:
        return cls(itos=(".", *sorted(set("".join(words)))))

    @property
    def stoi(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)


def read_words(path: Path) -> list[str]:
    """One name per line, as in names.txt."""
    return path.read_text(encoding="utf-8").splitlines()


def build_dataset(
    words: list[str], vocab: Vocabulary, block_size: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Contexts ``X`` (examples, block_size) and next-character targets ``Y`` (examples,)."""
    stoi = vocab.stoi
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = [*context[1:], ix]
    return torch.tensor(X), torch.tensor(Y)


@dataclass(frozen=True)
class Splits:
    """The lecture's three splits of the shuffled words."""

    vocab: Vocabulary
    Xtr: torch.Tensor
    Ytr: torch.Tensor
    Xdev: torch.Tensor
    Ydev: torch.Tensor
    Xte: torch.Tensor
    Yte: torch.Tensor


def lecture_splits(words: list[str], block_size: int = 3) -> Splits:
    """Shuffle with ``random.seed(42)`` and split 80/10/10, exactly as the lecture does."""
    vocab = Vocabulary.from_words(words)
    shuffled = list(words)
    random.Random(42).shuffle(
        shuffled
    )  # same permutation as random.seed(42); random.shuffle(words)
    n1, n2 = int(0.8 * len(shuffled)), int(0.9 * len(shuffled))
    Xtr, Ytr = build_dataset(shuffled[:n1], vocab, block_size)
    Xdev, Ydev = build_dataset(shuffled[n1:n2], vocab, block_size)
    Xte, Yte = build_dataset(shuffled[n2:], vocab, block_size)
    return Splits(vocab, Xtr, Ytr, Xdev, Ydev, Xte, Yte)


def lecture_batch(
    splits: Splits, cfg: Config = LECTURE, seed: int = LECTURE_SEED
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch the notebook uses: parameters are drawn first from the seeded generator, then
    ``batch_size`` random training rows from the same generator."""
    g = torch.Generator().manual_seed(seed)
    init_params(cfg, g)  # advances g exactly as the notebook does before it draws the batch
    ix = torch.randint(0, splits.Xtr.shape[0], (cfg.batch_size,), generator=g)
    return splits.Xtr[ix], splits.Ytr[ix]


FIXTURE = Path(__file__).resolve().parent.parent / "exercises" / LECTURE_BATCH
"""Where the committed fixture lives in a clone (package data of ``autograder.exercises``)."""


def write_lecture_fixture(names_txt: Path, out: Path = FIXTURE) -> None:
    """Derive the committed fixture (the lecture's batch) from names.txt."""
    splits = lecture_splits(read_words(names_txt))
    Xb, Yb = lecture_batch(splits)
    data = {
        "seed": LECTURE_SEED,
        "block_size": LECTURE.block_size,
        "batch_size": LECTURE.batch_size,
        "vocab": "".join(splits.vocab.itos),
        "Xb": Xb.tolist(),
        "Yb": Yb.tolist(),
    }
    out.write_text(json.dumps(data, indent=None) + "\n")

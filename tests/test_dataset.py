"""The lecture's dataset pipeline, checked against names.txt and the committed fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from autograder.core.model import load_lecture_batch
from autograder.dataset.makemore import (
    FIXTURE,
    Splits,
    build_dataset,
    lecture_batch,
    lecture_splits,
    read_words,
    write_lecture_fixture,
)
from autograder.exercises.mlp import LECTURE_SEED


@pytest.fixture(scope="module")
def words(names_txt: Path) -> list[str]:
    return read_words(names_txt)


@pytest.fixture(scope="module")
def splits(words: list[str]) -> Splits:
    return lecture_splits(words)


def test_names_txt_holds_32033_names(words: list[str]) -> None:
    assert len(words) == 32033
    assert words[:3] == ["emma", "olivia", "ava"]


def test_the_vocabulary_has_27_characters_with_the_dot_first(splits: Splits) -> None:
    assert len(splits.vocab) == 27
    assert splits.vocab.stoi["."] == 0
    assert "".join(splits.vocab.itos) == ".abcdefghijklmnopqrstuvwxyz"


def test_contexts_are_padded_with_dots_and_end_on_a_dot(splits: Splits) -> None:
    X, Y = build_dataset(["ava"], splits.vocab, block_size=3)
    a, v = splits.vocab.stoi["a"], splits.vocab.stoi["v"]
    assert X.tolist() == [[0, 0, 0], [0, 0, a], [0, a, v], [a, v, a]]
    assert Y.tolist() == [a, v, a, 0]


def test_the_split_has_the_lecture_sizes(splits: Splits) -> None:
    assert splits.Xtr.shape == (182625, 3) and splits.Ytr.shape == (182625,)
    assert splits.Xdev.shape == (22655, 3) and splits.Ydev.shape == (22655,)
    assert splits.Xte.shape == (22866, 3) and splits.Yte.shape == (22866,)


def test_the_committed_lecture_batch_is_reproduced_from_names_txt(
    names_txt: Path, splits: Splits, tmp_path: Path
) -> None:
    Xb, Yb = lecture_batch(splits)
    Xc, Yc, seed = load_lecture_batch()
    assert seed == LECTURE_SEED
    assert torch.equal(Xb, Xc) and torch.equal(Yb, Yc)

    out = tmp_path / "lecture_batch.json"
    write_lecture_fixture(names_txt, out)
    assert json.loads(out.read_text()) == json.loads(FIXTURE.read_text())

"""Shared fixtures of the kit's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def names_txt() -> Path:
    """A verified copy of names.txt, never downloaded by the tests.

    Looked for in ``$BACKPROP_NINJA_NAMES``, then ``../shared/data/names.txt`` beside the clone
    (where CI puts it), then ``data/names.txt`` (after ``backprop-ninja data``).
    """
    from autograder.names import ENV_VAR, verify

    env = os.environ.get(ENV_VAR, "").strip()
    candidates = [Path(env)] if env else []
    candidates += [
        REPO_ROOT.parent / "shared" / "data" / "names.txt",
        REPO_ROOT / "data" / "names.txt",
    ]
    for path in candidates:
        if path.is_file():
            verify(path)
            return path
    pytest.fail(
        "names.txt not found: run `backprop-ninja data`, or set "
        f"{ENV_VAR} to a copy (looked in: {', '.join(map(str, candidates))})"
    )

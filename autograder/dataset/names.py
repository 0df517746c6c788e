"""names.txt: where it lives, how it is fetched, and how the kit knows it is the right file.

The dataset is the 32,033 names published in the makemore repository. The kit never commits it:
``backprop-ninja data`` downloads it into ``data/names.txt`` and checks its SHA-256, and every
reader refuses a file whose checksum differs, since a truncated or edited copy would silently
change the vocabulary, the split and the lecture batch.

Where names.txt is looked for, first match wins:

1. an explicit path (``backprop-ninja data --path FILE``);
2. the environment variable ``BACKPROP_NINJA_NAMES``;
3. ``data/names.txt`` in the kit's folder (a clone), else in the working directory.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import sys
import tempfile
import urllib.request
from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parent.parent.parent
"""The folder holding the ``autograder`` package: a clone of the kit when installed editable."""

NAMES_URL = "https://raw.githubusercontent.com/karpathy/makemore/master/names.txt"
"""Where the makemore repository publishes names.txt."""

NAMES_SHA256 = "0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d"
"""SHA-256 of the published names.txt (32,033 names)."""

ENV_VAR = "BACKPROP_NINJA_NAMES"
"""Environment variable holding the path of names.txt, when it is not in ``data/``."""


def _default_path() -> Path:
    """``data/names.txt`` in a clone of the kit; elsewhere (an installed wheel), in the working
    directory's ``data/``."""
    clone = KIT_ROOT / "pyproject.toml"
    base = KIT_ROOT if clone.is_file() else Path.cwd()
    return base / "data" / "names.txt"


DEFAULT_PATH = _default_path()
"""Where ``backprop-ninja data`` puts names.txt by default (git-ignored)."""

DOWNLOAD_TIMEOUT = 30.0
"""Seconds to wait for the server before giving up on a download."""


class NamesError(Exception):
    """names.txt is missing, corrupt or could not be downloaded; the message says what to do."""


def names_path(explicit: Path | None = None) -> Path:
    """Where names.txt is (or should go): ``explicit``, else ``$BACKPROP_NINJA_NAMES``, else
    ``data/names.txt``."""
    if explicit is not None:
        return explicit
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return DEFAULT_PATH


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str = NAMES_SHA256) -> None:
    """Raise :class:`NamesError` unless ``path`` is names.txt with the expected SHA-256."""
    if not path.is_file():
        raise NamesError(f"{path} does not exist. {_where_to_put_it(path)}")
    found = sha256_of(path)
    if found != expected:
        raise NamesError(
            f"{path} is not the makemore names.txt: its SHA-256 is {found}, expected {expected}. "
            f"The file is corrupt or a different dataset; delete it and run `backprop-ninja data` "
            f"again, or replace it with names.txt from {NAMES_URL}."
        )


def download(
    dest: Path,
    url: str = NAMES_URL,
    timeout: float = DOWNLOAD_TIMEOUT,
    expected: str = NAMES_SHA256,
) -> None:
    """Download ``url`` to ``dest`` and verify it.

    The bytes go to a temporary file beside ``dest`` that is renamed into place only once its
    checksum is right, so an interrupted or corrupt download never leaves a partial ``dest``.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".names-", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    while block := response.read(1 << 16):
                        out.write(block)
            except (OSError, ValueError, http.client.HTTPException) as exc:
                reason = getattr(exc, "reason", exc)
                raise NamesError(
                    f"could not download names.txt from {url} ({reason}). {_where_to_put_it(dest)}"
                ) from exc
        found = sha256_of(tmp)
        if found != expected:
            raise NamesError(
                f"the file downloaded from {url} is not the makemore names.txt: its SHA-256 is "
                f"{found}, expected {expected}. Nothing was written to {dest}."
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def ensure_names(
    path: Path | None = None, url: str = NAMES_URL, timeout: float = DOWNLOAD_TIMEOUT
) -> Path:
    """The verified names.txt: an existing file is checked (never overwritten), a missing one
    is downloaded. Raises :class:`NamesError` with what to do when neither works."""
    target = names_path(path)
    if target.exists():
        verify(target)
    else:
        download(target, url=url, timeout=timeout)
    return target


def data_command(args: argparse.Namespace) -> int:
    """``backprop-ninja data [--path FILE]``: make a verified names.txt available.

    Exit status 0 when the file is there and its checksum is right, 1 otherwise (with a message
    on stderr that says what was found and what to do).
    """
    explicit: Path | None = getattr(args, "path", None)
    target = names_path(explicit)
    existed = target.exists()
    try:
        ensure_names(explicit)
    except NamesError as exc:
        print(f"backprop-ninja data: {exc}", file=sys.stderr)
        return 1
    action = "verified" if existed else "downloaded and verified"
    print(f"names.txt {action}: {target} (SHA-256 {NAMES_SHA256})")
    return 0


def _where_to_put_it(dest: Path) -> str:
    return (
        f"Without network access, copy names.txt (SHA-256 {NAMES_SHA256}, from {NAMES_URL}) "
        f"to {dest}, or set {ENV_VAR} to the path of your copy."
    )

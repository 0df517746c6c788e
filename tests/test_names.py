"""names.txt: located, downloaded, verified, and never committed."""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.dataset.names import (
    DEFAULT_PATH,
    ENV_VAR,
    NAMES_SHA256,
    NamesError,
    data_command,
    download,
    ensure_names,
    names_path,
    sha256_of,
    verify,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
OFFLINE_URL = "http://127.0.0.1:9/names.txt"  # the discard port: nothing listens there


@pytest.fixture
def corrupt_copy(names_txt: Path, tmp_path: Path) -> Path:
    """names.txt with one name edited: same size, different checksum."""
    path = tmp_path / "names.txt"
    text = names_txt.read_text(encoding="utf-8")
    path.write_text(text.replace("emma", "emmy", 1), encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server over a temporary folder: (base URL, folder it serves)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_published_file_has_the_expected_checksum(names_txt: Path) -> None:
    assert sha256_of(names_txt) == NAMES_SHA256
    verify(names_txt)


def test_a_corrupt_file_is_refused_naming_the_expected_and_found_checksums(
    corrupt_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = sha256_of(corrupt_copy)
    before = corrupt_copy.read_bytes()

    assert data_command(argparse.Namespace(path=corrupt_copy)) == 1

    err = capsys.readouterr().err
    assert NAMES_SHA256 in err and found in err
    assert "expected" in err
    assert corrupt_copy.read_bytes() == before  # refused, not silently replaced


def test_an_explicit_path_wins_over_the_environment(
    names_txt: Path, corrupt_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(corrupt_copy))
    assert names_path(names_txt) == names_txt
    assert data_command(argparse.Namespace(path=names_txt)) == 0


def test_the_environment_variable_is_honoured(
    names_txt: Path, corrupt_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(names_txt))
    assert names_path() == names_txt
    assert data_command(argparse.Namespace(path=None)) == 0

    monkeypatch.setenv(ENV_VAR, str(corrupt_copy))
    assert data_command(argparse.Namespace(path=None)) == 1


def test_without_path_or_environment_names_txt_goes_to_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert names_path() == DEFAULT_PATH == REPO_ROOT / "data" / "names.txt"


def test_offline_the_error_says_where_to_put_the_file(tmp_path: Path) -> None:
    dest = tmp_path / "data" / "names.txt"

    with pytest.raises(NamesError) as info:
        ensure_names(dest, url=OFFLINE_URL, timeout=5)

    message = str(info.value)
    assert OFFLINE_URL in message
    assert str(dest) in message and ENV_VAR in message and NAMES_SHA256 in message
    assert list(dest.parent.iterdir()) == []  # no partial file left behind


def test_a_download_is_verified_then_moved_into_place(
    names_txt: Path, server: tuple[str, Path], tmp_path: Path
) -> None:
    base, served = server
    shutil.copy(names_txt, served / "names.txt")
    dest = tmp_path / "data" / "names.txt"

    assert ensure_names(dest, url=f"{base}/names.txt") == dest

    assert sha256_of(dest) == NAMES_SHA256
    assert [p.name for p in dest.parent.iterdir()] == ["names.txt"]


def test_a_corrupt_download_leaves_nothing_behind(
    corrupt_copy: Path, server: tuple[str, Path], tmp_path: Path
) -> None:
    base, served = server
    shutil.copy(corrupt_copy, served / "names.txt")
    dest = tmp_path / "data" / "names.txt"

    with pytest.raises(NamesError, match=NAMES_SHA256):
        download(dest, url=f"{base}/names.txt")

    assert list(dest.parent.iterdir()) == []  # neither names.txt nor a partial file


def test_names_txt_is_ignored_and_not_tracked_by_git() -> None:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
        )

    assert git("ls-files", "--error-unmatch", "data/names.txt").returncode != 0
    assert git("check-ignore", "-q", "data/names.txt").returncode == 0

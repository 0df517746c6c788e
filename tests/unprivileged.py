"""Running Python, or the ``backprop-ninja`` CLI, as an unprivileged user (``nobody``).

The sandbox must confine as well without root as with it (an instructor's account, a CI runner
without privileges). CI runs the suite as root, so the suite drops privileges itself for the
non-root variant of its security tests: :func:`run_python` starts a child in a private mount
namespace (``unshare --mount``) that makes the interpreter reachable to ``nobody`` (a
Python under a home folder of mode 0700, such as ``/root/.pyenv``, is rebound under a
world-traversable cover of that folder, only in that namespace), then ``setpriv`` drops to
uid/gid 65534 with no supplementary groups and no capabilities. Every snippet first asserts
that it runs as that uid: the unprivileged variant of a test cannot silently run as root.

When the suite itself runs without root, the child simply runs as the suite's user (and
asserts that it is not root).

:func:`require_unprivileged` decides whether this is possible here; when it is not, the test is
skipped with the reason, except under ``CI=true``, where it fails: a security test never skips
silently in CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534
"""The uid and gid the unprivileged variant runs as (when the suite runs as root)."""

REPO_ROOT = Path(__file__).resolve().parent.parent


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail under ``CI=true`` (a security test never skips there)."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a security test may not be skipped)")
    pytest.skip(reason)


def expected_uid() -> int:
    """The uid an unprivileged child runs as: nobody under root, else the suite's own."""
    return NOBODY if os.geteuid() == 0 else os.geteuid()


def _blocked(path: Path) -> Path | None:
    """The highest ancestor of ``path`` that others cannot traverse (mode without o+x)."""
    parts = path.resolve().parts
    for i in range(2, len(parts) + 1):
        here = Path(*parts[:i])
        try:
            mode = here.stat().st_mode
        except OSError:
            return None
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return here
    return None


def _reach_script(paths: Sequence[Path]) -> tuple[str, list[str]]:
    """Shell commands (run as root in the private mount namespace) that make ``paths``
    reachable to others: for each folder closed to them, its child on the way to the path is
    bound elsewhere, the folder is covered by a tmpfs of mode 0755, and the child bound back
    into it. Returns (script, stash folders to remove afterwards)."""
    lines, stashes, covered = [], [], set()
    for path in paths:
        top = _blocked(path)
        if top is None or top in covered:
            continue
        covered.add(top)
        children = sorted(
            {Path(*p.resolve().parts[: len(top.parts) + 1]) for p in paths if _blocked(p) == top}
        )
        lines.append("set -e")
        saved = []
        for child in children:
            stash = tempfile.mkdtemp(prefix="bn-unprivileged-")
            stashes.append(stash)
            saved.append((child, stash))
            lines.append(f"mount --bind '{child}' '{stash}'")
        lines.append(f"mount -t tmpfs -o mode=755 tmpfs '{top}'")
        for child, stash in saved:
            lines.append(f"mkdir -p '{child}' && mount --bind '{stash}' '{child}'")
    return "\n".join(lines), stashes


def _needed_paths() -> list[Path]:
    """What the child must reach: the interpreter, its installation, the venv, the kit."""
    found = {Path(sys.executable).resolve(), Path(sys.prefix), Path(sys.base_prefix), REPO_ROOT}
    return sorted(p.resolve() for p in found)


def _command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command that runs ``argv`` unprivileged, and stash folders to remove afterwards."""
    if os.geteuid() != 0:
        return list(argv), []
    script, stashes = _reach_script(_needed_paths())
    drop = "exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "
    drop += '--bounding-set=-all "$@"'
    inner = f"{script}\n{drop}" if script else drop
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh", *argv], (
        stashes
    )


def require_unprivileged() -> None:
    """Skip (or fail under CI) unless an unprivileged child can be started here."""
    if os.geteuid() == 0:
        for tool in ("unshare", "setpriv"):
            if shutil.which(tool) is None:
                skip_or_fail(f"{tool} (util-linux) is needed to test the sandbox without root")
    result = run_python("print('ok')", timeout=120, check=False)
    if result.returncode != 0 or result.stdout.strip() != "ok":
        skip_or_fail(f"cannot start an unprivileged child here: {result.stderr[-2000:]}")


def shared_folder() -> Path:
    """A fresh folder the unprivileged child may write (pytest's own are closed to others);
    remove it with :func:`remove_shared`."""
    folder = Path(tempfile.mkdtemp(prefix="bn-unprivileged-"))
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o755)
    return folder


def remove_shared(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def shared_tmp() -> Iterator[Path]:
    folder = shared_folder()
    try:
        yield folder
    finally:
        remove_shared(folder)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of an unprivileged child: this one's (names.txt, switches), a home it
    may write, the kit's root on the path."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


UID_CHECK = (
    "import os as _os\n"
    "assert _os.getuid() == _os.geteuid() == {uid} and _os.getgid() == {gid}, "
    "('not unprivileged', _os.getuid(), _os.getgid())\n"
)


def _prologue() -> str:
    uid = expected_uid()
    gid = NOBODY if os.geteuid() == 0 else os.getegid()
    return UID_CHECK.format(uid=uid, gid=gid)


def run_python(
    code: str,
    *,
    timeout: float = 600,
    check: bool = True,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (a Python snippet) unprivileged; it asserts its uid first."""
    argv, stashes = _command([sys.executable, "-c", _prologue() + code])
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env or child_env(),
            cwd=str(cwd or REPO_ROOT),
            check=False,
        )
    finally:
        for stash in stashes:
            with contextlib.suppress(OSError):
                os.rmdir(stash)
    if check and result.returncode != 0:
        raise AssertionError(
            f"unprivileged child failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-5000:]}"
        )
    return result


def run_json(code: str, **kwargs: Any) -> Any:
    """Run ``code`` unprivileged; it prints one JSON document as its last line of output."""
    result = run_python(code, **kwargs)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines, result.stderr[-3000:]
    return json.loads(lines[-1])


def popen_cli(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    **kwargs: Any,
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``python -m autograder ARGS`` unprivileged (one process: ``unshare`` and ``sh``
    exec into it, so its pid is the CLI's). Returns the process and stash folders to remove
    with :func:`cleanup` once it ended."""
    runner = "import sys, runpy\nsys.argv = ['backprop-ninja', *sys.argv[1:]]\n"
    runner += "runpy.run_module('autograder', run_name='__main__', alter_sys=True)\n"
    argv, stashes = _command([sys.executable, "-c", _prologue() + runner, *args])
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or child_env(),
        cwd=str(cwd or REPO_ROOT),
        **kwargs,
    )
    return proc, stashes


def cleanup(stashes: list[str]) -> None:
    for stash in stashes:
        with contextlib.suppress(OSError):
            os.rmdir(stash)

"""What a sandbox may see and how it is confined: the plan handed to :mod:`launch`.

The sandbox sees only what its interpreter needs, read-only: the system's libraries, the Python
installation, and the virtual environment's ``bin`` and ``lib`` folders (site-packages, where
torch is). It never sees the folders on ``sys.path`` that are no part of an installation (the
course root that nbgrader puts there, a clone of the kit, the working directory), and where the
kit itself is installed into site-packages, that folder is covered by an empty one: the
sandbox's only code of the kit is the runner, copied in.

:func:`choose_mode` decides how: ``userns`` (the kit's own launcher) where unprivileged user
namespaces work, else ``bwrap`` where bubblewrap is installed and works (Ubuntu's AppArmor
policy lets its ``bwrap`` create them), else nothing, and the grader refuses to run untrusted
code unless told to accept the risk (``mode="none"``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Mode = Literal["userns", "bwrap", "none"]

SANDBOX_DIR = Path(__file__).resolve().parent
"""This folder: the runner's three files are copied from here into each sandbox."""

KIT_DIR = SANDBOX_DIR.parent
"""The kit's package (``autograder``): never visible inside a sandbox."""

RUNNER_FILES = ("runner.py", "wire.py", "seccomp.py")
"""The kit's only code inside a sandbox."""

SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
)
"""The system's libraries and loader configuration, and the user names (no secrets)."""

ENV_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
"""Environment variables a sandbox keeps; every other one (tokens, paths) is dropped. Two
switches are passed on, for tests and for kernels that refuse them: ``BACKPROP_NINJA_SECCOMP=0``
(no seccomp filter) and ``BACKPROP_NINJA_NEST=0`` (no namespaces of a submission's own)."""


@dataclass(frozen=True)
class Confinement:
    """How sandboxes are confined on this machine, for reports and refusals."""

    mode: Mode
    reason: str  # why this mode (and why not the stronger ones)


def _is_under(path: str, parent: str) -> bool:
    path, parent = os.path.normpath(path), os.path.normpath(parent)
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def interpreter_paths() -> tuple[list[str], list[str]]:
    """(paths to bind read-only, paths to cover) for this interpreter (see the module doc)."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    binds: set[str] = set()
    for prefix in prefixes:
        for part in ("bin", "lib", "lib64", "pyvenv.cfg"):
            path = os.path.join(prefix, part)
            if os.path.lexists(path):
                binds.add(path)
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        found = sysconfig.get_paths().get(key)
        if found and os.path.isdir(found):
            binds.add(found)
    for entry in sys.path:
        if not entry or not os.path.exists(entry):
            continue
        installed = any(_is_under(entry, p) for p in prefixes)
        named = os.path.basename(entry.rstrip("/")) in ("site-packages", "dist-packages")
        if installed or named:
            binds.add(entry)
    # The interpreter binary may be a symlink into another installation (pyenv, a venv).
    exe = sys.executable
    for path in (exe, os.path.realpath(exe)):
        binds.add(os.path.dirname(path))
    real = {os.path.realpath(p) for p in binds}
    binds |= real
    kit = str(KIT_DIR)
    # A bind inside another is already visible (and would hide nothing): keep the outer one.
    outer = sorted(p for p in binds if not any(q != p and _is_under(p, q) for q in binds))
    hide = [kit] if any(_is_under(kit, p) for p in outer) else []
    hide += [
        str(p)
        for p in KIT_DIR.parent.glob("backprop_ninja-*.dist-info")
        if any(_is_under(str(p), q) for q in outer)
    ]
    return outer, hide


def scratch_path(binds: list[str]) -> str:
    """Where the sandbox's scratch tmpfs goes: ``/tmp``, unless something the sandbox must see
    lives there (a virtual environment made in the temporary folder, as a course's CI does),
    since a tmpfs mounted over it would hide it; then a folder of its own at the root."""
    for candidate in ("/tmp", "/scratch", "/backprop-ninja-scratch"):
        if not any(_is_under(b, candidate) or _is_under(candidate, b) for b in binds):
            return candidate
    raise RuntimeError("no folder for the sandbox's scratch: every candidate is in use")


def sandbox_binds() -> list[str]:
    """Every path the sandbox shows read-only: the system's folders, then the interpreter's."""
    return [p for p in SYSTEM_PATHS if os.path.lexists(p)] + interpreter_paths()[0]


def scratch_folder() -> str:
    """The scratch a submission finds (its ``$TMPDIR``, ``$HOME`` and working folder) for this
    interpreter: ``/tmp`` unless the interpreter lives there (see :func:`scratch_path`)."""
    return scratch_path(sandbox_binds())


def make_plan(
    mode: Mode,
    control_fd: int,
    tmp_bytes: int,
    runner_copy: str,
    cgroup: str | None = None,
    scratch: str = "",
) -> dict[str, Any]:
    """The JSON plan :mod:`launch` reads (see its docstring)."""
    _, hide = interpreter_paths()
    env = {k: os.environ[k] for k in ENV_KEPT if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.update(PYTHONHASHSEED="0")
    for key in ("BACKPROP_NINJA_SECCOMP", "BACKPROP_NINJA_NEST"):
        if key in os.environ:
            env[key] = os.environ[key]
    binds = sandbox_binds()
    return {
        "mode": mode,
        "parent": os.getpid(),
        "control_fd": control_fd,
        "python": sys.executable,
        "binds": binds,
        "tmp": scratch_path(binds),
        "hide": hide,
        "tmp_bytes": tmp_bytes,
        "nobody": os.geteuid() == 0 and mode != "none",
        "nproc": 0,
        "runner_dir": str(SANDBOX_DIR),
        "runner_files": list(RUNNER_FILES),
        "runner_copy": runner_copy,
        "scratch": scratch,
        "cgroup": cgroup,
        "env": env,
        "bwrap": shutil.which("bwrap") or "",
    }


COPY_PREFIX = "backprop-ninja-runner-"
"""Names of the runner's copies in the temporary folder."""

PENDING_PREFIX = "backprop-ninja-pending-"
"""A copy being made: it takes its copy name only once its lock is held, so that another
grader's sweep, starting at the same moment, never finds it with its lock free."""

_LOCKS: dict[str, int] = {}
"""Each live copy of this process -> the fd of its lock (held while the copy is in use)."""


def runner_copy() -> str:
    """A private folder holding copies of the runner's files (bind-mounted by bwrap, run in
    place without confinement); remove it with :func:`remove_runner_copy`. It is the
    ``runner`` folder inside one that also holds a lock for as long as this process uses it,
    so that copies of a grader killed outright are removed by the next one
    (:func:`sweep_runner_copies`)."""
    sweep_runner_copies()
    pending = tempfile.mkdtemp(prefix=PENDING_PREFIX)
    fd = os.open(os.path.join(pending, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    suffix = os.path.basename(pending).removeprefix(PENDING_PREFIX)
    top = os.path.join(os.path.dirname(pending), COPY_PREFIX + suffix)
    os.rename(pending, top)  # a sweep sees it from now on, its lock already held
    folder = os.path.join(top, "runner")
    os.mkdir(folder)
    _LOCKS[folder] = fd
    for name in RUNNER_FILES:
        shutil.copyfile(SANDBOX_DIR / name, os.path.join(folder, name))
    os.chmod(folder, 0o755)
    os.chmod(top, 0o755)
    return folder


def remove_runner_copy(folder: str) -> None:
    """Remove a copy made by :func:`runner_copy` and release its lock."""
    shutil.rmtree(os.path.dirname(folder), ignore_errors=True)
    fd = _LOCKS.pop(folder, None)
    if fd is not None:
        os.close(fd)


def sweep_runner_copies(base: str | None = None, stale_seconds: float = 3600.0) -> list[str]:
    """Remove this user's runner copies in ``base`` (the temporary folder) that no live process
    holds: their lock is free (its grader died, even by SIGKILL), or, for copies without one
    and copies left half made (:data:`PENDING_PREFIX`), they are older than ``stale_seconds``.
    Returns the folders removed."""
    base = base or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        pending = entry.name.startswith(PENDING_PREFIX)
        if not (pending or entry.name.startswith(COPY_PREFIX)):
            continue
        if os.path.join(entry.path, "runner") in _LOCKS:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.geteuid():
                continue
            lock = os.path.join(entry.path, ".lock")
            if pending:
                if time.time() - info.st_mtime < stale_seconds:
                    continue  # being made now (or its maker died: then an hour later)
            elif os.path.exists(lock):
                fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # in use
                finally:
                    os.close(fd)
            elif time.time() - info.st_mtime < stale_seconds:
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed

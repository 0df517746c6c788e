"""A memory limit for a sandbox as a whole: a cgroup where the grader can make one.

Inside a sandbox, answers cannot start processes (:data:`seccomp.STEP`) nor make memory that no
process accounts for (``memfd_create`` and SysV shared memory are refused; the scratch tmpfs has
a size), so the one process running answers, bounded by its address-space limit, is what a
submission can grow. Where the grader may create a cgroup (cgroup v2 with the memory controller
delegated to it, or v1's memory controller, typically as root) the whole sandbox also lives in a
cgroup of its own whose limit is the runner's own usage plus the answers' limit, so the kernel
enforces the total, whatever slips past the per-process limits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path


def _mounts() -> list[tuple[str, str, list[str]]]:
    """(mount point, filesystem type, super options) of every mount, from mountinfo."""
    out = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 3:
                out.append((fields[4], rest[0], rest[2].split(",")))
    return out


def _own_path(controller: str) -> str | None:
    """This process's cgroup path for ``controller`` ("" for v2's unified hierarchy)."""
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers.split(",") == [controller] or (controller == "" and controllers == ""):
                return path
    return None


PREFIX = "backprop-ninja-"
"""Names of the kit's cgroups: ``backprop-ninja-<grader pid>-<sandbox number>``."""

_swept = False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep() -> list[Path]:
    """Remove the kit's empty cgroups (beside this process's) whose grader is gone: a grader
    killed outright (SIGKILL) cannot remove its own, and its sandboxes die with it. One that
    still holds processes is left alone (a grader of another PID namespace may own it).
    Returns the stale ones left."""
    left = []
    for version in (2, 1):
        parent = _parent(version)
        if parent is None or not parent.is_dir():
            continue
        for path in parent.glob(PREFIX + "*"):
            pid = path.name[len(PREFIX) :].split("-")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                try:
                    os.rmdir(path)
                except OSError:
                    left.append(path)
    return left


def _parent(version: int) -> Path | None:
    """The folder the kit's cgroups go in, beside this process's own (None where none)."""
    if version == 2:
        mount = next((m for m, fs, _ in _mounts() if fs == "cgroup2"), None)
        own = _own_path("")
    else:
        mount = next((m for m, fs, opts in _mounts() if fs == "cgroup" and "memory" in opts), None)
        own = _own_path("memory")
    if mount is None or own is None:
        return None
    return Path(mount) / own.lstrip("/")


@dataclass
class MemoryCgroup:
    """One sandbox's cgroup (``version`` 1 or 2) at ``path``."""

    path: Path
    version: int

    @classmethod
    def create(cls, name: str) -> MemoryCgroup | None:
        """A new cgroup called ``name`` beside this process's, or None where none can be made.
        The first call also removes those of graders that died without removing theirs
        (:func:`sweep`)."""
        global _swept
        if not _swept:
            _swept = True
            with contextlib.suppress(OSError):
                sweep()
        for version in (2, 1):
            with contextlib.suppress(OSError):
                group = cls._create(name, version)
                if group is not None:
                    return group
        return None

    @classmethod
    def _create(cls, name: str, version: int) -> MemoryCgroup | None:
        parent = _parent(version)
        if parent is None:
            return None
        if version == 2:
            controls = (parent / "cgroup.subtree_control").read_text().split()
            if "memory" not in controls:
                (parent / "cgroup.subtree_control").write_text("+memory")
        path = parent / name
        try:
            path.mkdir()
        except FileExistsError:  # left by an earlier process of the same pid: empty, or busy
            path.rmdir()
            path.mkdir()
        group = cls(path, version)
        if not (path / group._limit_file).exists():
            path.rmdir()
            return None
        return group

    @property
    def _limit_file(self) -> str:
        return "memory.max" if self.version == 2 else "memory.limit_in_bytes"

    def set_limit(self, limit: int) -> None:
        (self.path / self._limit_file).write_text(str(int(limit)))
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.path / "memory.swap.max").write_text("0")

    def usage(self) -> int:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return 0

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the limit so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self, wait: float = 10.0) -> bool:
        """Kill what is left in the cgroup and remove it, waiting up to ``wait`` seconds for
        the kernel to let its processes go. True once it is gone."""
        deadline = time.monotonic() + wait
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                pass
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

"""Run untrusted callables in forked, confined, killable child processes.

Each task runs in a child made by ``os.fork()`` from the calling (trusted) process, so it reads
the tensors it closes over through copy-on-write memory and nothing is pickled. It sends back
bytes only, in a frame (magic, kind, length) written after ``task()`` returned: a truncated or
garbled stream is detected, and the parent never unpickles. The child can read whatever the
parent held at fork time (other submissions, reference tensors): keep secrets out of it.

Confinement, set up in the child before ``task()`` (Linux >= 5.3):

- always: own session; empty stdin; stdout+stderr into a pipe of which the parent keeps the first
  ``output_bytes`` and discards the rest (a flood never blocks the child nor fills memory); all
  other inherited fds closed; RLIMIT_CPU, RLIMIT_AS (inherited VmSize + ``memory_bytes``),
  RLIMIT_FSIZE 64 MiB, RLIMIT_CORE 0; oom_score_adj 1000 (the OOM killer takes a child, not the
  grader); no_new_privs; PDEATHSIG SIGKILL; environment cut to PATH, LANG, LC_*, TZ; torch on
  one thread.
- as root with CAP_SYS_ADMIN (not a default Docker container): the child is the init of a new
  PID namespace: killing it kills every descendant, setsid or not, and it is reaped only once
  they are all gone. It joins a network namespace without interfaces and a mount namespace,
  both made once and shared (concurrent tasks could reach each other over abstract unix
  sockets, nothing else), then unshares its own mount and IPC namespaces: /tmp is a fresh
  64 MiB tmpfs (cwd, HOME, TMPDIR); /var/tmp, /dev/shm, /run/lock and any directory nobody
  cannot traverse (pyenv under /root) are read-only empty tmpfs, with the interpreter's prefixes
  and import paths under them bind-mounted back. Then it becomes nobody without groups:
  signalling the grader and writing outside /tmp fail. RLIMIT_NPROC allows 16 processes more
  than the sandboxes alive (it counts per uid); RLIMIT_AS is per process, so a task that forks
  can use a multiple of ``memory_bytes``.
- otherwise: no PID namespace, so RLIMIT_NPROC is 0: the task can start neither processes nor
  threads, and nothing outlives it; a user+network namespace where unprivileged ones are
  allowed, else the network stays reachable; scratch is a fresh directory on disk (each file
  capped by RLIMIT_FSIZE, not their number), removed afterwards.

The parent watches every child's result pipe, output pipe and pidfd in one epoll loop (no
polling, no thread per task), kills with SIGKILL (pidfd, then killpg) on a verdict or at the
wall-clock limit and gives the outcome at once: the kernel's teardown of the child overlaps the
next task, the reap follows. It also backs its own memory with huge pages, which makes each fork
cheaper (see ``_collapse_memory``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import gc
import io
import os
import pwd
import resource
import selectors
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, TypeVar, cast

K = TypeVar("K")

Status = Literal["ok", "timeout", "crashed", "too-large", "no-result"]


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 10.0  # per task, wall clock, measured by the parent
    cpu_seconds: int = 20  # RLIMIT_CPU in the child
    memory_bytes: int = 4 * 2**30  # extra address space beyond what the child inherited
    output_bytes: int = 64 * 1024  # head of stdout+stderr kept, the rest discarded
    result_bytes: int = 256 * 2**20  # payload cap; larger -> status "too-large"


@dataclass(frozen=True)
class Outcome:
    status: Status
    payload: bytes  # bytes returned by the task (only meaningful when status == "ok")
    detail: str  # human-readable reason
    output: str  # captured stdout/stderr head, decoded with errors="replace"
    seconds: float  # wall time


_HEADER = struct.Struct("!8scQ")  # magic, kind (R: result, E: error text), body length
_MAGIC = b"BPNSBX1\n"
_ERROR_TEXT_MAX = 2000
_SCRATCH_BYTES = 64 * 2**20  # tmpfs scratch size; RLIMIT_FSIZE
_EXTRA_PROCESSES = 16
_WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_EXIT_NO_CHANNEL = 74

_CLONE_NEWNS, _CLONE_NEWIPC = 0x00020000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_MADV_COLLAPSE = 25
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 32, 4096
_MS_REC, _MS_PRIVATE = 16384, 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
# Bound at import: a task may monkeypatch os, the wrapper must still leave through _exit.
_exit, _write = os._exit, os.write


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int, opts: str) -> None:
    _check(_libc.mount(source, target.encode(), fstype, flags, opts.encode() or None), target)


class _PidNamespace:
    """Puts the next fork of the calling thread into a new PID namespace, as its init.

    ``unshare(CLONE_NEWPID)`` changes only the namespace of the caller's future children and
    only for the calling thread; ``setns`` back to our own right after the fork undoes it. Two
    syscalls instead of the second fork that an unshare in the child would need.
    """

    def __init__(self) -> None:
        self.available = os.geteuid() == 0
        self._own: int | None = None

    def fork(self) -> int:
        if self.available and self._own is None:
            self._own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        if not self.available or self._own is None or _libc.unshare(_CLONE_NEWPID) != 0:
            self.available = False  # e.g. root in a container without CAP_SYS_ADMIN
            return os.fork()
        pid = -1
        try:
            pid = os.fork()
        finally:
            if pid != 0:  # the parent's later forks (subprocess, ...) stay in its own namespace
                _check(_libc.setns(self._own, _CLONE_NEWPID), "setns")
        return pid


_pidns = _PidNamespace()


_prepared: dict[object, tuple[int, int]] = {}


def _prepared_namespaces(uid: int, gid: int, plan: list[tuple[str, list[str]]]) -> tuple[int, int]:
    """Fds of a network and a mount namespace made once, which every child joins (root only).

    The network namespace is empty (its loopback down, and nobody may raise it): concurrent
    tasks could talk over abstract unix sockets, nothing else. In the mount namespace every
    directory of the plan but /tmp is covered by a read-only tmpfs holding only its bind-mounted
    import paths. A child then needs two setns, an unshare and its own /tmp: ~0.4 ms less than
    building it all per task, and no network namespace to make and tear down (~0.7 ms).
    Returns (-1, -1) where namespaces cannot be made.
    """
    key = (uid, gid, str(plan))
    if key in _prepared:
        return _prepared[key]
    for fd in (fd for fds in _prepared.values() for fd in fds if fd >= 0):
        os.close(fd)  # sys.path changed since: a new plan replaces the old one
    _prepared.clear()
    fds = _prepared[key] = (-1, -1)
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a helper that only lives to make the namespaces, trusted code
        try:
            os.close(hold_w)  # or the read below would never see end-of-file
            _check(_libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS), "unshare")
            _mount(b"none", "/", None, _MS_REC | _MS_PRIVATE, "")  # nothing propagates out
            _cover([entry for entry in plan if entry[0] != "/tmp"], "", read_only=True)
            os.write(ready_w, b"1")
            os.read(hold_r, 1)
        finally:
            _exit(0)
    os.close(ready_w)
    os.close(hold_r)
    try:
        if os.read(ready_r, 1) == b"1":
            net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            mnt = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            fds = _prepared[key] = (net, mnt)
    finally:
        for fd in (ready_r, hold_w):
            os.close(fd)
        os.waitpid(pid, 0)
    return fds


_collapsed_at = -1e9


def _collapse_memory() -> None:
    """Back the grader's anonymous memory with transparent huge pages (MADV_COLLAPSE, 6.1+).

    A fork copies one page-table entry per page the parent has: after ``import torch`` that
    is ~35,000 4 KiB pages but only ~70 huge ones, so fork and the child's exit get about twice
    as cheap (measured: 7 -> 5 ms of CPU per task) for the same memory. Parent writes split
    huge pages again over time, so this is redone, at most every 30 s (the first call takes
    ~0.2 s, later ones a few ms). Harmless where unsupported: madvise fails, nothing changes.
    Only mappings at least half populated are collapsed, so memory use grows little (0.6 MB
    measured after ``import torch``).
    """
    global _collapsed_at
    if time.monotonic() - _collapsed_at < 30:
        return
    _collapsed_at = time.monotonic()
    huge, regions, current = 2**21, [], None
    with contextlib.suppress(OSError), open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0]:  # a mapping's first line: range, perms, offset, dev, inode, name
                current = None
                private_anon = fields[1].startswith("rw") and fields[1].endswith("p")
                if private_anon and (len(fields) < 6 or fields[5] == "[heap]"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    current = [-(-start // huge) * huge, end // huge * huge, 0]
                    regions.append(current)
            elif fields[0] == "Rss:" and current is not None:
                current[2] = int(fields[1]) * 1024
    for start, end, rss in regions:
        # Only mostly populated ranges: collapsing fills a huge page however little of it is used.
        if end > start and rss >= (end - start) // 2:
            _libc.madvise(start, end - start, _MADV_COLLAPSE)


@dataclass(frozen=True)
class _Spec:
    """What the child needs to confine itself, prepared by the parent."""

    limits: Limits
    result_w: int
    output_w: int
    scratch: str
    ppid: int
    root: bool
    uid: int
    gid: int
    nproc: int
    plan: list[tuple[str, list[str]]]
    netns: int  # fd of the shared empty network namespace, or -1
    mntns: int  # fd of the shared prepared mount namespace, or -1
    grader_mnt_ns: int  # inode of the grader's mount namespace


def _setup_child(spec: _Spec, in_pidns: bool) -> None:
    """Confine the freshly forked child (see the module docstring). Runs before task()."""
    gc.freeze()  # the inherited heap is not ours to scan: keeps the GC from copying its pages
    os.setsid()
    if spec.netns >= 0:
        _check(_libc.setns(spec.netns, _CLONE_NEWNET), "setns net")
    in_prepared = spec.mntns >= 0 and _libc.setns(spec.mntns, _CLONE_NEWNS) == 0
    # Out of the way first: the pipe ends may sit on fds 0..3.
    result_fd = fcntl.fcntl(spec.result_w, fcntl.F_DUPFD, 10)
    output_fd = fcntl.fcntl(spec.output_w, fcntl.F_DUPFD, 10)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.dup2(result_fd, 3)
    os.closerange(4, 2**31 - 1)  # close_range(2): the grader's files and sockets are not ours
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    # Fresh streams on the new fds: the grader's may be pytest's or a Jupyter kernel's. Line
    # buffered, so what a task printed before it was killed is not lost.
    sys.stdin = io.StringIO()  # like /dev/null, and cheaper to make than a file object
    sys.stdout = open(1, "w", 1, "utf-8", "backslashreplace", closefd=False)
    sys.stderr = open(2, "w", 1, "utf-8", "backslashreplace", closefd=False)

    home = ""
    if in_prepared and _libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC) == 0:
        # Mount only in a namespace of its own: never the grader's, never the shared one.
        tmp = [entry for entry in spec.plan if entry[0] == "/tmp"]
        if tmp and os.stat("/proc/self/ns/mnt").st_ino != spec.grader_mnt_ns:
            scratch = f"mode=0700,uid={spec.uid},gid={spec.gid},size={_SCRATCH_BYTES}"
            with contextlib.suppress(OSError):
                _cover(tmp, scratch, read_only=False)
                home = "/tmp"
    elif not spec.root:
        _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC)  # where userns are allowed
    if not home:  # no private tmpfs: a fresh directory on disk, which the parent removes
        home = spec.scratch
        os.mkdir(home, 0o700)
        if spec.root:
            os.chown(home, spec.uid, spec.gid)
    os.chdir(home)
    environ = os.environ  # no tokens for the task; one pass (clear() is quadratic)
    kept = {key: environ[key] for key in _KEPT_ENV if key in environ}
    for key in list(environ):
        del environ[key]
    environ.update(kept, HOME=home, TMPDIR=home, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    tempfile.tempdir = home

    with contextlib.suppress(OSError):  # fails only in a grader that changed its uid
        _write_file("/proc/self/oom_score_adj", b"1000")
    fd = os.open("/proc/self/statm", os.O_RDONLY)  # its first field is VmSize, in pages
    vm_size = int(os.read(fd, 100).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    os.close(fd)
    limit = resource.setrlimit
    limit(resource.RLIMIT_AS, (vm_size + spec.limits.memory_bytes,) * 2)
    # Soft then hard: as a PID namespace's init the child ignores SIGXCPU, not SIGKILL.
    limit(resource.RLIMIT_CPU, (spec.limits.cpu_seconds, spec.limits.cpu_seconds + 1))
    limit(resource.RLIMIT_FSIZE, (_SCRATCH_BYTES,) * 2)
    limit(resource.RLIMIT_CORE, (0, 0))
    # Without a PID namespace what a task spawned could escape the kill: it may spawn nothing.
    limit(resource.RLIMIT_NPROC, ((spec.nproc if in_pidns and spec.root else 0),) * 2)
    if spec.root:
        os.setgroups([])
        os.setresgid(spec.gid, spec.gid, spec.gid)
        os.setresuid(spec.uid, spec.uid, spec.uid)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    # After setuid, which clears it; then make sure the grader did not die in between.
    _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if not in_pidns and os.getppid() != spec.ppid:
        _exit(70)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)  # the parent's pool is gone after fork; no oversubscription


def _cover(plan: list[tuple[str, list[str]]], scratch_opts: str, read_only: bool) -> None:
    """Cover each directory of the plan with a fresh tmpfs and bind back what it keeps."""
    for top, keep in plan:
        kept = {}
        for path in keep:  # O_PATH handles keep the originals reachable once covered
            with contextlib.suppress(OSError):
                kept[path] = os.open(path, os.O_PATH)
        if top == "/tmp":
            opts = scratch_opts
        else:
            opts = f"mode={1777 if top in _WORLD_WRITABLE else 755},size={2**20}"
        flags = _MS_NOSUID | _MS_NODEV
        try:
            _mount(b"sandbox", top, b"tmpfs", flags, opts)
        except OSError:
            if top == "/tmp":
                raise
            continue
        for path, fd in kept.items():
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
                _mount(f"/proc/self/fd/{fd}".encode(), path, None, _MS_BIND | _MS_REC, "")
            os.close(fd)
        if read_only:  # nothing a task writes there could outlive it
            with contextlib.suppress(OSError):
                _mount(None, top, None, flags | _MS_REMOUNT | _MS_RDONLY, opts)


@functools.cache
def _nobody() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _mount_plan() -> list[tuple[str, list[str]]]:
    try:
        cwd = os.getcwd()
    except OSError:  # deleted: relative import paths lead nowhere anyway
        cwd = ""
    key = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.executable, cwd, *sys.path)
    if key not in _plans:
        _plans[key] = _make_mount_plan(cwd)
    return _plans[key]


_plans: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}


def _make_mount_plan(cwd: str) -> list[tuple[str, list[str]]]:
    """Which directories the child covers with a fresh tmpfs, and what it binds back under each.

    The world-writable ones (/tmp, the scratch, then /var/tmp, /dev/shm, /run/lock), so nothing
    a task writes outlives it. And, as the child becomes nobody, any directory nobody cannot
    traverse on the way to the interpreter's files (pyenv under /root, mode 0700), or lazy
    imports would fail. The interpreter's prefixes and import paths under a covered directory
    are bind-mounted back, so imports work and nothing else there is visible.
    """
    paths = set()
    executable = os.path.dirname(os.path.realpath(sys.executable))
    for entry in (sys.prefix, sys.base_prefix, sys.exec_prefix, executable, *sys.path):
        if cwd or os.path.isabs(entry):
            entry = os.path.join(cwd, entry)
            paths |= {os.path.normpath(entry), os.path.realpath(entry)}
    covered: dict[str, set[str]] = {d: set() for d in _WORLD_WRITABLE if os.path.isdir(d)}
    for path in sorted(p for p in paths if os.path.exists(p)):  # exists: so its parents too
        current = "/"
        for name in path.strip("/").split("/"):  # find its outermost covered ancestor
            try:
                closed = not os.stat(current).st_mode & stat.S_IXOTH
            except OSError:
                break
            if current in covered or closed:
                covered.setdefault(current, set()).add(path)
                break
            current = os.path.join(current, name)
    plan = []
    for top, inside in sorted(covered.items()):
        keep: list[str] = []
        for path in sorted(inside):  # sorted: a path comes before what lies inside it
            if not any(path.startswith(k + "/") for k in keep):
                keep.append(path)
        plan.append((top, keep))
    return plan


def _write_file(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _write_all(data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[_write(3, view) :]


def _child_main(task: Callable[[], bytes], spec: _Spec, in_pidns: bool) -> None:
    """Never returns: every path ends in os._exit."""
    kind, code = b"E", 1
    body: bytes | bytearray = b""
    try:
        _setup_child(spec, in_pidns)
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        body = f"sandbox setup failed: {exc!r}".encode(errors="replace")
    else:
        try:
            payload = task()
            if isinstance(payload, (bytes, bytearray, memoryview)):
                kind, code = b"R", 0
                body = payload.tobytes() if isinstance(payload, memoryview) else payload
            else:
                body = f"returned {type(payload).__name__}, not bytes".encode()
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the task's own
            with contextlib.suppress(BaseException):
                traceback.print_exc()
            try:
                message = str(exc)
                text = f"raised {type(exc).__name__}" + (f": {message}" if message else "")
            except BaseException:
                text = "raised an exception that cannot be printed"
            body = text[:_ERROR_TEXT_MAX].encode(errors="replace")
    try:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        _write_all(_HEADER.pack(_MAGIC, kind, len(body)))
        if len(body) <= spec.limits.result_bytes:  # else the header alone tells the parent
            _write_all(body)
    except BaseException:
        code = _EXIT_NO_CHANNEL  # the task closed or replaced fd 3
    finally:
        _exit(code)


@dataclass(eq=False)
class _Child:
    key: object
    pid: int
    pidfd: int
    fds: dict[int, str]  # fd -> "result" / "output"
    scratch: str
    limits: Limits
    started: float
    result: bytearray = field(default_factory=bytearray)
    output: bytearray = field(default_factory=bytearray)
    payload: bytes = b""


_SIGNAL_HINTS = {int(signal.SIGXCPU): "CPU time limit", int(signal.SIGXFSZ): "file size limit"}


def _describe_exit(child: _Child, status: int, grown_bytes: int) -> tuple[Status, str]:
    if os.WIFSIGNALED(status):
        num = os.WTERMSIG(status)
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = "unknown"
        detail = f"killed by signal {num} ({name})"
        if num == signal.SIGKILL and grown_bytes > child.limits.memory_bytes // 2:
            detail += ", likely out of memory"
        elif num in _SIGNAL_HINTS:
            detail += f", {_SIGNAL_HINTS[num]} exceeded"
        return "crashed", detail
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if code == 0 and not child.result:
        return "no-result", "exited with code 0 without returning a result"
    if code == 0:
        return "crashed", f"exited with code 0 after {len(child.result)} bytes of a result"
    if code == _EXIT_NO_CHANNEL:
        return "crashed", f"exited with code {code}: its result channel was closed"
    return "crashed", f"exited with code {code}"


class _Supervisor:
    """One epoll loop over every live child's pipes and pidfd."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.selector = selectors.DefaultSelector()
        self.running: dict[int, _Child] = {}  # pid -> child, no verdict yet
        self.dying: dict[int, _Child] = {}  # given a verdict and SIGKILL, not reaped yet
        self.ready: list[tuple[object, Outcome]] = []
        _remove_stale_bases()
        self.base = tempfile.mkdtemp(prefix=f"{_BASE_PREFIX}{os.getpid()}-")
        self.root = os.geteuid() == 0
        self.uid, self.gid, self.plan = os.getuid(), os.getgid(), []
        self.netns = self.mntns = -1
        self.mnt_ns = os.stat("/proc/self/ns/mnt").st_ino
        if self.root:
            self.uid, self.gid = _nobody()
            self.plan = _mount_plan()
            self.netns, self.mntns = _prepared_namespaces(self.uid, self.gid, self.plan)
            os.chmod(self.base, 0o711)  # nobody may enter a scratch dir on disk, list nothing
        self.devnull, self.splice = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC), True
        _collapse_memory()
        self.count = 0
        # Peak RSS of the grader: at most what a child starts with (for the OOM guess).
        self.inherited_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def start(self, key: object, task: Callable[[], bytes]) -> None:
        self.count += 1
        scratch = os.path.join(self.base, str(self.count))  # made by the child if needed
        result_r, result_w = os.pipe2(os.O_CLOEXEC)
        output_r, output_w = os.pipe2(os.O_CLOEXEC)
        for stream in (sys.stdout, sys.stderr):  # or the child would re-emit what is buffered
            with contextlib.suppress(Exception):
                stream.flush()
        nproc = _EXTRA_PROCESSES + len(self.running) + len(self.dying)  # zombies count too
        spec = _Spec(
            self.limits, result_w, output_w, scratch, os.getpid(), self.root, self.uid, self.gid,
            nproc, self.plan, self.netns, self.mntns, self.mnt_ns,
        )  # fmt: skip
        started, pid = time.monotonic(), -1
        try:
            pid = _pidns.fork()
            if pid == 0:
                try:
                    _child_main(task, spec, _pidns.available)
                finally:
                    _exit(70)
            os.close(result_w)
            os.close(output_w)
            child = _Child(key, pid, os.pidfd_open(pid), {}, scratch, self.limits, started)
            self.dying[pid] = child  # until registered, so that close() finds it whatever happens
            for fd, name in ((result_r, "result"), (output_r, "output")):
                os.set_blocking(fd, False)
                child.fds[fd] = name
                self.selector.register(fd, selectors.EVENT_READ, child)
            self.selector.register(child.pidfd, selectors.EVENT_READ, child)
            self.running[pid] = self.dying.pop(pid)
        except BaseException:
            if pid > 0 and pid not in self.dying:  # forked, but not even a pidfd to watch it
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            for fd in (result_r, result_w, output_r, output_w):
                with contextlib.suppress(OSError):
                    if pid < 0 or fd not in (result_w, output_w):
                        os.close(fd)
            raise

    def wait(self) -> list[tuple[object, Outcome]]:
        """Block until some task has an outcome (or a deadline passes); return the outcomes."""
        deadlines = [c.started + c.limits.wall_seconds for c in self.running.values()]
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        for sel_key, _ in self.selector.select(timeout):
            child: _Child = sel_key.data
            if sel_key.fd == child.pidfd:
                self._reap(child)
            elif sel_key.fd in child.fds:
                self._read(child, sel_key.fd)
        now = time.monotonic()
        for child in list(self.running.values()):
            if now >= child.started + child.limits.wall_seconds:
                wall = child.limits.wall_seconds
                self._settle(child, ("timeout", f"killed after {wall:.1f} s (wall-clock limit)"))
        ready, self.ready = self.ready, []
        return ready

    def _read(self, child: _Child, fd: int) -> bool:
        """Read what is there; False once the pipe is empty, closed or no longer wanted."""
        name = child.fds[fd]
        try:
            if name == "output":
                room = child.limits.output_bytes - len(child.output)
                if room <= 0:  # drain without copying, so the child never blocks on a full pipe
                    data = b"x" if self._discard(fd) else b""
                else:
                    data = os.read(fd, min(room, 2**20))
                    child.output += data
            else:
                data = os.read(fd, self._wanted(child))
                child.result += data
        except BlockingIOError:
            return False
        if name == "result" and data:
            self._check_result(child)  # may settle the child, which closes its pipes
        if not data and fd in child.fds:
            self._close_fd(child, fd)
        return bool(data) and fd in child.fds

    def _discard(self, fd: int) -> int:
        if self.splice:
            try:
                return os.splice(fd, self.devnull, 2**20)
            except BlockingIOError:
                raise
            except OSError:  # splice to /dev/null refused: read and drop instead
                self.splice = False
        return len(os.read(fd, 2**20))

    def _wanted(self, child: _Child) -> int:
        # Never more than header + length: a body over result_bytes is refused on its header.
        if len(child.result) < _HEADER.size:
            return _HEADER.size - len(child.result)
        length = _HEADER.unpack_from(child.result)[2]
        return max(1, min(2**20, _HEADER.size + length - len(child.result)))

    def _check_result(self, child: _Child) -> None:
        if len(child.result) < _HEADER.size:
            return
        magic, kind, length = _HEADER.unpack_from(child.result)
        if magic != _MAGIC or kind not in (b"R", b"E"):
            self._settle(child, ("crashed", "wrote malformed data to the result channel"))
        elif kind == b"R" and length > child.limits.result_bytes:
            size = f"{length} bytes, limit {child.limits.result_bytes}"
            self._settle(child, ("too-large", f"result too large ({size})"))
        elif len(child.result) >= _HEADER.size + length:
            body = bytes(child.result[_HEADER.size :])
            if kind == b"R":
                child.payload = body
                self._settle(child, ("ok", "returned a result"))
            else:  # written by the wrapper when task() raised; the text is the task's
                self._settle(child, ("crashed", body[:_ERROR_TEXT_MAX].decode(errors="replace")))

    def _settle(self, child: _Child, verdict: tuple[Status, str]) -> None:
        """Kill the child and give its outcome now; its reap follows when its pidfd fires.

        Not waiting for the kernel to tear the child down (~2 ms for a torch-sized process)
        frees its slot at once: the next task starts while the last one's exit completes.
        """
        if child.pid not in self.running:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
        with contextlib.suppress(OSError):  # the group cannot be reused before the reap
            os.killpg(child.pid, signal.SIGKILL)
        seconds = time.monotonic() - child.started
        self.dying[child.pid] = child
        del self.running[child.pid]
        for fd in [fd for fd, name in child.fds.items() if name == "output"]:
            for _ in range(100_000):  # what it printed before the verdict is in the pipe
                if not self._read(child, fd):
                    break
        for fd in list(child.fds):
            self._close_fd(child, fd)
        output = child.output.decode(errors="replace")
        status, detail = verdict
        self.ready.append((child.key, Outcome(status, child.payload, detail, output, seconds)))

    def _close_fd(self, child: _Child, fd: int) -> None:
        self.selector.unregister(fd)
        os.close(fd)
        del child.fds[fd]

    def _reap(self, child: _Child) -> None:
        with contextlib.suppress(OSError):  # stragglers in the group (no-namespace mode)
            os.killpg(child.pid, signal.SIGKILL)
        try:
            _, status, usage = os.wait4(child.pid, 0)
            grown = usage.ru_maxrss * 1024 - self.inherited_rss
        except ChildProcessError:  # SIGCHLD ignored by someone: the kernel reaped it already
            status, grown = 0, 0
        if child.pid in self.running:  # it ended by itself: its last words are in the pipes
            for fd in [fd for fd, name in child.fds.items() if name == "result"]:
                for _ in range(100_000):
                    if not self._read(child, fd):
                        break
            self._settle(child, _describe_exit(child, status, grown))
        self.selector.unregister(child.pidfd)
        os.close(child.pidfd)
        del self.dying[child.pid]
        _remove_scratch(child.scratch)

    def close(self) -> None:
        for child in list(self.running.values()):
            self._settle(child, ("crashed", "stopped: the grader was interrupted"))
        for child in list(self.dying.values()):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
            self._reap(child)
        self.ready.clear()
        self.selector.close()
        os.close(self.devnull)
        _remove_scratch(self.base)


_BASE_PREFIX = "backprop-ninja-sandbox-"
_stale_checked = False


def _remove_stale_bases() -> None:
    """Remove the scratch bases of graders that were killed (no finally ran), once a process."""
    global _stale_checked
    if _stale_checked:
        return
    _stale_checked = True
    tmp = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(tmp):
            pid = entry.name.removeprefix(_BASE_PREFIX).split("-")[0]
            if entry.name.startswith(_BASE_PREFIX) and pid.isdigit():
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == os.geteuid() and time.time() - info.st_mtime > 600:
                    try:
                        os.kill(int(pid), 0)
                    except ProcessLookupError:  # its grader is gone
                        _remove_scratch(entry.path)
                    except OSError:
                        pass


def _remove_scratch(path: str) -> None:
    """Remove a scratch tree, even one the task made unreadable (mode 000 dirs)."""
    try:
        os.rmdir(path)
        return
    except FileNotFoundError:  # the tmpfs case: the child made nothing on disk
        return
    except OSError:
        pass
    for top, dirs, _ in os.walk(path):  # top-down: each dir is opened up before it is entered
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(top, name), 0o700, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)


def run(task: Callable[[], bytes], limits: Limits = Limits()) -> Outcome:
    """Run one task in a sandboxed child and return how it went (see the module docstring)."""
    with contextlib.closing(_outcomes([(None, task)], limits, jobs=1)) as outcomes:
        for _, outcome in outcomes:
            return outcome
    raise AssertionError("run_many yielded nothing for one task")


def run_many(
    tasks: Iterable[tuple[K, Callable[[], bytes]]],
    limits: Limits = Limits(),
    jobs: int = 0,
) -> Iterator[tuple[K, Outcome]]:
    """Run tasks in parallel (at most `jobs` children alive; 0 means os.cpu_count()), yielding
    (key, outcome) as each finishes (order of completion). Consumes `tasks` lazily. When the
    consumer stops early or an exception (KeyboardInterrupt...) arrives, every live child is
    killed and reaped and its scratch removed before it propagates."""
    return _outcomes(tasks, limits, jobs)


def _outcomes(
    tasks: Iterable[tuple[K, Callable[[], bytes]]], limits: Limits, jobs: int
) -> Generator[tuple[K, Outcome], None, None]:
    jobs = jobs if jobs > 0 else os.cpu_count() or 1
    pending = iter(tasks)
    supervisor = _Supervisor(limits)
    exhausted = False
    try:
        while True:
            # Up to `jobs` tasks run; up to `jobs` more killed children may still be exiting.
            while not exhausted and max(len(supervisor.running), len(supervisor.dying)) < jobs:
                try:
                    key, task = next(pending)
                except StopIteration:
                    exhausted = True
                    break
                supervisor.start(key, task)
            if exhausted and not supervisor.running:
                return  # close() reaps the children still exiting
            for done_key, outcome in supervisor.wait():
                yield cast(K, done_key), outcome
    finally:
        supervisor.close()

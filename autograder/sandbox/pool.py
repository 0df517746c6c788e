"""The grader's side of the sandboxes: a pool of them, each grading one submission at a time.

A :class:`Pool` keeps up to ``jobs`` sandboxes (each a :mod:`launch`-ed runner). It hands each one
a bank of case inputs once, then jobs: one submission's answers at a time. It starts with one
sandbox and adds another only once jobs have waited, with every sandbox busy, for as long as a
sandbox takes to start (importing torch, measured on the first): a class whose distinct answers
one sandbox runs in less time than that never pays for a second, and a class with more work never
waits more than twice what it would with every sandbox started at once. The pool watches every
sandbox's stream in one event loop and yields each answer's :class:`Outcome` as it arrives. A
sandbox that dies is replaced and its unfinished answers are run again, each alone, once; a
submission that outlives its time budget (plus a grace) has its sandbox killed and its
unfinished answers time out; a sandbox whose scratch could not be emptied after a submission is
replaced. An outcome that depends on the rest of its submission (a spent budget, a failed
sandbox) says so (``Outcome.own`` is False): the grader must not give it to another
submission's identical answer. Nothing a submission does reaches another submission, the pool, or
the grader: the pool only reads frames, checks them, and passes bytes on.

Why one module of this length: the event loop above, its failure handling and its scheduling
share one state (the sandboxes and their jobs).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from . import wire
from .limits import Limits, Outcome
from .memory import MemoryCgroup
from .plan import SANDBOX_DIR, Confinement, Mode, make_plan, remove_runner_copy, runner_copy

LAUNCH = str(SANDBOX_DIR / "launch.py")
EXIT_CONFINEMENT = 75  # launch.EXIT_CONFINEMENT (launch.py runs as a script; not imported)
GRACE_SECONDS = 15.0
"""Beyond a submission's budget, how long its sandbox may take before it is killed."""
FIRST_START_GUESS = 1.0
"""Seconds a sandbox takes to start, until the first one has been measured."""
START_SECONDS = 120.0
"""How long a sandbox may take to start (importing torch) before it counts as failed."""
MAX_FRAME = 1 << 30


class SandboxUnavailable(RuntimeError):
    """No sandbox can be started here; the message says why and what to do."""


@dataclass(frozen=True)
class Task:
    """One answer to run: its outcome is yielded under ``key``."""

    key: Hashable
    name: str  # the variable the answer must assign
    upstream: tuple[str, ...]  # upstream gradients it is given
    code: str
    plain: bool  # may share a process with the other plain answers of its job


@dataclass(frozen=True)
class Job:
    """One submission's answers (all from that submission: a sandbox sees no other)."""

    bank: str  # the case inputs they run on
    tasks: tuple[Task, ...]
    retry: bool = False  # a rerun after a sandbox failure (not retried again)


@dataclass(frozen=True)
class Bank:
    """Case inputs, encoded once, sent to every sandbox that needs them."""

    id: str
    frame: bytes


@dataclass(eq=False)
class _Slot:
    index: int
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    reader: wire.Reader
    cgroup: MemoryCgroup | None
    started: float
    ready: bool = False
    banks: set[str] = field(default_factory=set)
    job: Job | None = None
    waiting: dict[Hashable, Task] = field(default_factory=dict)
    deadline: float = 0.0
    stderr: bytearray = field(default_factory=bytearray)
    oom_kills: int = 0
    dead: bool = False


_CGROUP_IDS = itertools.count(1)
"""Numbers for this process's cgroups: two pools in one grader never pick the same name."""

_probed: dict[str, Confinement] = {}


def _probe(mode: Mode) -> str | None:
    """None if a sandbox of ``mode`` can be set up here, else the launcher's complaint."""
    plan = make_plan(mode, control_fd=0, tmp_bytes=1 << 20, runner_copy="/nonexistent")
    plan["probe"] = True
    try:
        proc = subprocess.run(
            [sys.executable, "-I", LAUNCH, json.dumps(plan)],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if proc.returncode == 0:
        return None
    return proc.stderr.decode(errors="replace").strip() or f"exit status {proc.returncode}"


def choose_mode(requested: str = "auto") -> Confinement:
    """How sandboxes are confined here (see :mod:`autograder.sandbox.plan`); raises
    :class:`SandboxUnavailable` when ``requested`` cannot be had. ``requested`` is ``auto``,
    ``userns``, ``bwrap`` or ``none`` (accept running answers without confinement)."""
    requested = os.environ.get("BACKPROP_NINJA_SANDBOX", "") or requested
    if requested in _probed:
        return _probed[requested]
    if requested == "none":
        found = Confinement("none", "confinement switched off: answers run with your rights")
        _probed[requested] = found
        return found
    reasons = []
    for mode in ("userns", "bwrap") if requested == "auto" else (requested,):
        if mode not in ("userns", "bwrap"):
            raise SandboxUnavailable(f"unknown sandbox mode {mode!r}: auto, userns, bwrap, none")
        if mode == "bwrap" and not shutil.which("bwrap"):
            reasons.append("bwrap: bubblewrap is not installed")
            continue
        why = _probe(cast(Mode, mode))
        if why is None:
            found = Confinement(cast(Mode, mode), "; ".join(reasons) or "user namespaces work")
            _probed[requested] = found
            return found
        reasons.append(f"{mode}: {why.splitlines()[-1] if why else 'failed'}")
    raise SandboxUnavailable(
        "no sandbox can be set up on this machine, so untrusted code will not be run ("
        + "; ".join(reasons)
        + "). Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
        "or on Ubuntu 23.10+ kernel.apparmor_restrict_unprivileged_userns=0), or install "
        "bubblewrap (apt install bubblewrap), or accept the risk explicitly with "
        "--sandbox none (BACKPROP_NINJA_SANDBOX=none): answers then run with your rights."
    )


class Pool:
    """``jobs`` sandboxes of one confinement mode, started on demand (see the module doc)."""

    def __init__(self, limits: Limits, jobs: int = 0, sandbox: str = "auto") -> None:
        self.limits = limits
        self.jobs = jobs if jobs > 0 else os.cpu_count() or 1
        self.confinement = choose_mode(sandbox)
        self.banks: dict[str, Bank] = {}
        self.slots: list[_Slot] = []
        self.selector = selectors.DefaultSelector()
        self.copy = runner_copy()
        self.started = 0
        self.failures = 0
        self.closed = False
        self.start_cost = FIRST_START_GUESS  # seconds a sandbox took to start, last measured
        self.backlog_since: float | None = None  # since when jobs wait with no sandbox idle

    # -- sandboxes ---------------------------------------------------------------------------

    def warm(self) -> None:
        """Start a sandbox now, if none is running (it imports torch while the grader builds
        its cases); more start as the work asks for them (see the module docstring)."""
        if not self.slots:
            self._start()

    def _grow_at(self) -> float | None:
        """When another sandbox should start, if jobs keep waiting (None: not now)."""
        if len(self.slots) >= self.jobs or self.backlog_since is None:
            return None
        if any(not s.ready for s in self.slots):
            return None  # one is starting already
        return self.backlog_since + self.start_cost

    def _start(self) -> _Slot:
        self.started += 1
        index = self.started
        ours, theirs = socket.socketpair()
        cgroup = None
        if self.confinement.mode != "none":
            # unique in this process, whatever other pools it runs (names are per grader pid)
            cgroup = MemoryCgroup.create(f"backprop-ninja-{os.getpid()}-{next(_CGROUP_IDS)}")
        if cgroup is not None:
            cgroup.set_limit(self.limits.memory_bytes + 4 * 2**30)  # torch first; set at ready
        scratch = ""
        if self.confinement.mode == "none":
            scratch = os.path.join(self.copy, f"scratch-{index}")
            os.mkdir(scratch, 0o700)
        plan = make_plan(
            self.confinement.mode,
            theirs.fileno(),
            self.limits.tmp_bytes,
            self.copy,
            str(cgroup.path) if cgroup else None,
            scratch,
        )
        proc = subprocess.Popen(
            [sys.executable, "-I", LAUNCH, json.dumps(plan)],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        theirs.close()
        assert proc.stderr is not None
        os.set_blocking(proc.stderr.fileno(), False)
        slot = _Slot(index, proc, ours, wire.Reader(MAX_FRAME), cgroup, time.monotonic())
        self.selector.register(ours, selectors.EVENT_READ, ("sock", slot))
        self.selector.register(proc.stderr, selectors.EVENT_READ, ("err", slot))
        self.slots.append(slot)
        return slot

    def _kill(self, slot: _Slot) -> None:
        if slot.dead:
            return
        slot.dead = True
        for fileobj in (slot.sock, slot.proc.stderr):
            with contextlib.suppress(KeyError, ValueError):
                if fileobj is not None:
                    self.selector.unregister(fileobj)
        with contextlib.suppress(OSError):
            os.killpg(slot.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            slot.proc.kill()
        slot.sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            slot.proc.wait(timeout=10)
        if slot.proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                slot.stderr += slot.proc.stderr.read() or b""
            slot.proc.stderr.close()
        if slot.cgroup is not None:
            slot.cgroup.remove()
        self.slots.remove(slot)

    def add_bank(self, bank_id: str, header: dict[str, Any], blobs: list[bytes]) -> None:
        """Case inputs that jobs may name (encoded now, sent to each sandbox once)."""
        frame = wire.encode({"op": "bank", "id": bank_id, **header}, blobs)
        self.banks[bank_id] = Bank(bank_id, frame)

    # -- running jobs ------------------------------------------------------------------------

    def run(self, jobs: Iterable[Job]) -> Iterator[tuple[Hashable, Outcome]]:
        """Run every job; yield ``(task key, outcome)`` as each answer finishes. Consumes
        ``jobs`` lazily. If the consumer stops early, busy sandboxes are killed."""
        queue: deque[Job] = deque()
        source = iter(jobs)
        exhausted = False
        ready: list[tuple[Hashable, Outcome]] = []
        try:
            while True:
                while not exhausted and len(queue) < self.jobs:
                    try:
                        queue.append(next(source))
                    except StopIteration:
                        exhausted = True
                busy = [s for s in self.slots if s.job is not None]
                if exhausted and not queue and not busy:
                    return
                self._dispatch(queue, ready)
                yield from ready
                ready.clear()
                self._wait(queue, ready)
                yield from ready
                ready.clear()
        finally:
            for slot in [s for s in self.slots if s.job is not None]:
                self._kill(slot)

    def _dispatch(self, queue: deque[Job], ready: list[tuple[Hashable, Outcome]]) -> None:
        while queue:
            idle = [s for s in self.slots if s.ready and s.job is None and not s.dead]
            if not idle:
                now = time.monotonic()
                if self.backlog_since is None:
                    self.backlog_since = now
                grow = self._grow_at()
                if not self.slots or (grow is not None and now >= grow):
                    self._start()
                    self.backlog_since = now
                return
            slot, job = idle[0], queue.popleft()
            if not job.tasks:
                continue
            try:
                self._send(slot, job)
            except OSError:
                self._failed(slot, queue, ready, "the sandbox stopped")
        self.backlog_since = None

    def _send(self, slot: _Slot, job: Job) -> None:
        if job.bank not in slot.banks:
            slot.sock.sendall(self.banks[job.bank].frame)
            slot.banks.add(job.bank)
        steps = [
            {
                "key": i,
                "name": t.name,
                "upstream": list(t.upstream),
                "code": t.code,
                "plain": t.plain,
            }
            for i, t in enumerate(job.tasks)
        ]
        header = {"op": "steps", "bank": job.bank, "limits": self.limits.wire(), "steps": steps}
        slot.job = job
        slot.waiting = {i: t for i, t in enumerate(job.tasks)}
        slot.deadline = time.monotonic() + self.limits.budget_seconds + GRACE_SECONDS
        slot.sock.sendall(wire.encode({"op": "submission"}) + wire.encode(header))

    def _wait(self, queue: deque[Job], ready: list[tuple[Hashable, Outcome]]) -> None:
        now = time.monotonic()
        deadlines = [s.deadline for s in self.slots if s.job is not None]
        deadlines += [s.started + START_SECONDS for s in self.slots if not s.ready]
        grow = self._grow_at() if queue else None
        if grow is not None:
            deadlines.append(grow)
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        for key, _ in self.selector.select(timeout):
            kind, slot = key.data
            if slot.dead:
                continue
            if kind == "err":
                with contextlib.suppress(OSError, TypeError):
                    data = os.read(key.fd, 65536)
                    slot.stderr = (slot.stderr + data)[-8192:]
                continue
            try:
                data = slot.sock.recv(1 << 20)
            except OSError:
                data = b""
            if not data:
                self._failed(slot, queue, ready, "the sandbox stopped")
                continue
            try:
                frames = slot.reader.feed(data)
            except wire.WireError:
                self._failed(slot, queue, ready, "the sandbox sent garbled data")
                continue
            for header, blobs in frames:
                self._frame(slot, header, blobs, queue, ready)
        now = time.monotonic()
        for slot in list(self.slots):
            if slot.job is not None and now >= slot.deadline:
                why = f"stopped: the submission's time budget of {self.limits.budget_seconds:g} s"
                self._finish(slot, ready, "timeout", why + " was spent")
                self._kill(slot)
            elif not slot.ready and now >= slot.started + START_SECONDS:
                self._failed(slot, queue, ready, "the sandbox did not start in time")

    def _frame(
        self,
        slot: _Slot,
        header: dict[str, Any],
        blobs: list[bytes],
        queue: deque[Job],
        ready: list[tuple[Hashable, Outcome]],
    ) -> None:
        op = header.get("op")
        if op == "ready":
            slot.ready = True
            self.start_cost = max(0.05, time.monotonic() - slot.started)
            self.failures = 0
            if slot.cgroup is not None:  # the runner's own memory, plus what answers may use
                slot.cgroup.set_limit(slot.cgroup.usage() + self.limits.memory_bytes + 2**26)
                slot.oom_kills = slot.cgroup.oom_kills()
        elif op == "outcome" and slot.job is not None:
            task = slot.waiting.pop(header.get("key"), None)
            if task is not None:
                ready.append((task.key, self._outcome(slot, header, blobs)))
        elif op == "idle":
            if slot.job is not None and slot.waiting:  # the supervisor died mid-way
                self._requeue(
                    slot, queue, ready, f"the sandbox's supervisor {header.get('status')}"
                )
            slot.job = None
            slot.waiting = {}
            if header.get("clean") is not True:  # its scratch keeps something: not reused
                self._kill(slot)
        elif op in ("done", "banked"):
            pass
        else:
            self._failed(slot, queue, ready, "the sandbox sent an unknown message")

    def _outcome(self, slot: _Slot, header: dict[str, Any], blobs: list[bytes]) -> Outcome:
        status = header.get("status")
        if status not in ("ok", "timeout", "crashed", "too-large", "no-result"):
            status, detail = "crashed", "an unknown status"
        else:
            detail = str(header.get("detail", ""))[:500]
        if status == "crashed" and slot.cgroup is not None:
            kills = slot.cgroup.oom_kills()
            if kills > slot.oom_kills:
                slot.oom_kills = kills
                detail = f"{detail}: out of memory (the sandbox's memory limit)"
        alarms = header.get("autograd")
        return Outcome(
            status=status,  # type: ignore[arg-type]
            payload=blobs[0] if blobs and status == "ok" else b"",
            detail=detail,
            output=str(header.get("output", ""))[: self.limits.output_bytes],
            seconds=float(header.get("seconds", 0.0)),
            autograd=[str(a)[:200] for a in alarms][:20] if isinstance(alarms, list) else [],
            own=header.get("own") is not False,
        )

    def _finish(
        self, slot: _Slot, ready: list[tuple[Hashable, Outcome]], status: str, detail: str
    ) -> None:
        for task in slot.waiting.values():
            outcome = Outcome(status, b"", detail, own=False)  # type: ignore[arg-type]
            ready.append((task.key, outcome))
        slot.waiting = {}
        slot.job = None

    def _requeue(
        self, slot: _Slot, queue: deque[Job], ready: list[tuple[Hashable, Outcome]], why: str
    ) -> None:
        """Unfinished answers of a failed sandbox: each alone in a fresh one, once."""
        job = slot.job
        if job is None:
            return
        if job.retry:
            self._finish(slot, ready, "crashed", why)
            return
        for task in slot.waiting.values():
            queue.appendleft(Job(job.bank, (task,), retry=True))
        slot.waiting = {}
        slot.job = None

    def _failed(
        self, slot: _Slot, queue: deque[Job], ready: list[tuple[Hashable, Outcome]], why: str
    ) -> None:
        was_ready = slot.ready
        self._requeue(slot, queue, ready, why)
        self._kill(slot)
        if not was_ready:
            self.failures += 1
            if self.failures >= 3:
                text = slot.stderr.decode(errors="replace").strip()[-2000:]
                raise SandboxUnavailable(f"the sandbox does not start ({why}): {text}")

    def close(self) -> None:
        """Stop every sandbox and remove the runner's copy."""
        if self.closed:
            return
        self.closed = True
        for slot in list(self.slots):
            self._kill(slot)
        self.selector.close()
        remove_runner_copy(self.copy)

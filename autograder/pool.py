"""Where student code runs: a clean fork server, and one sandbox per submission.

Two things make grading a class both fast and tamper-proof:

**The fork server.** Every sandbox is forked, so it can read whatever its parent holds in memory.
The grader computes float64 references; a sandbox forked from it could find them (walking frames
from the answer's code) and return them. So :class:`ForkServer` forks once, right after the
hidden cases are built and before any reference exists, and every sandbox is forked from that
clean copy. The server runs only the kit's code; the grader sends it answer code and reads back
framed outcomes over two pipes.

**One sandbox per submission.** Confining a process (namespaces, scratch mounts, dropping to
nobody) costs several milliseconds; a class is 26 steps times hundreds of notebooks. So a
submission's steps share one sandbox, :func:`supervise`, which forks one plain child per step
and, after each, kills every process left in its PID namespace (``kill(-1)`` from the namespace's
init reaches exactly the steps' processes). A step therefore sees nothing another step did:
monkeypatches, threads and stray processes all die with it. A step's child cannot signal the
supervisor (a namespace's init ignores signals from inside it) nor read its memory or file
descriptors (it is not dumpable after the drop to nobody), and it holds only its own result pipe.
Where the sandbox has no PID namespace (not root), the supervisor declines and the grader runs
each step in a sandbox of its own, as it also does when a supervisor dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import resource
import select
import signal
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

from .plain import is_plain
from .sandbox import Limits, Outcome, run_many

_LEN = struct.Struct("<Q")
_FRAME = struct.Struct("<QQ")  # header length, body length
_PR_SET_PDEATHSIG = 1


# ---------------------------------------------------------------------------------------------
# framing helpers (both ends)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _send(fd: int, header: dict[str, Any], body: bytes = b"") -> None:
    head = json.dumps(header).encode()
    _write_all(fd, _FRAME.pack(len(head), len(body)) + head + body)


def _receive(fd: int) -> tuple[dict[str, Any], bytes]:
    hlen, blen = _FRAME.unpack(_read_exact(fd, _FRAME.size))
    return json.loads(_read_exact(fd, hlen)), _read_exact(fd, blen)


# ---------------------------------------------------------------------------------------------
# inside one sandbox: a child per step


def _step_child(task: Callable[[], bytes], w: int) -> None:
    """Never returns. Keeps only stdin/out/err and its own result pipe, then runs the task."""
    code = 0
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        os.closerange(3, w)
        os.closerange(w + 1, soft if 0 < soft < 1 << 20 else 1 << 16)
        data = task()
        _write_all(w, _LEN.pack(len(data)) + data)
    except BaseException:  # run_answer catches the answer's own exceptions; this is a crash
        code = 70
    finally:
        os._exit(code)


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by signal {sig} ({signal.Signals(sig).name})"
        return f"killed by signal {sig}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def _kill_everything_else() -> None:
    """Kill every process of this PID namespace but ourselves (its init), and reap them."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _complete(data: bytearray) -> bool:
    return len(data) >= _LEN.size and _LEN.unpack(data[: _LEN.size])[0] == len(data) - _LEN.size


def _wait_until(pid: int, deadline: float) -> int | None:
    """The exit status of ``pid`` once it ends, or None if it is still running at the deadline
    (its result pipe can close long before it ends: the code closed its descriptors)."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)


def _run_step(task: Callable[[], bytes], limits: Limits) -> tuple[dict[str, Any], bytes]:
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _step_child(task, w)
    os.close(w)
    data, status, detail = bytearray(), "ok", ""
    cap = limits.result_bytes + _LEN.size
    deadline = start + limits.wall_seconds
    timed_out = f"killed after {limits.wall_seconds:g} s (wall-clock limit)"
    try:
        # Until the result is complete, not until end-of-file: a process the code forked may
        # hold the pipe open for ever, and it dies with the rest below.
        while not _complete(data):
            left = deadline - time.monotonic()
            if left <= 0:
                status, detail = "timeout", timed_out
                break
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                continue
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            data += chunk
            if len(data) > cap:
                status, detail = "too-large", f"result over {limits.result_bytes} bytes"
                break
    finally:
        os.close(r)
    exit_status = None
    if status == "ok" and not _complete(data):
        exit_status = _wait_until(pid, deadline)
        if exit_status is None:
            status, detail = "timeout", timed_out
    _kill_everything_else()
    seconds = time.monotonic() - start
    if status == "ok":
        if not _complete(data):
            why = _status_text(exit_status) if exit_status is not None else "ended"
            status = "crashed" if data or exit_status else "no-result"
            detail = f"{why} before returning a result"
            data = bytearray()
        else:
            data = data[_LEN.size :]
    return {"status": status, "detail": detail, "seconds": seconds}, bytes(data)


def _shared_child(tasks: list[Callable[[], bytes]], w: int) -> None:
    """Never returns. Runs plain tasks one after another, writing (index, length, bytes) frames."""
    code = 0
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        os.closerange(3, w)
        os.closerange(w + 1, soft if 0 < soft < 1 << 20 else 1 << 16)
        for index, task in enumerate(tasks):
            data = task()
            _write_all(w, _FRAME.pack(index, len(data)) + data)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _run_shared(
    tasks: list[tuple[str, Callable[[], bytes]]], limits: Limits
) -> dict[str, tuple[dict[str, Any], bytes]]:
    """Run plain tasks in one child, each within its own wall-clock limit. Returns the outcomes
    of the tasks that finished normally; a timeout is final for its task; after a timeout or a
    crash the tasks that did not finish are left out (the caller runs them one per process)."""
    if not tasks:
        return {}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _shared_child([t for _, t in tasks], w)
    os.close(w)
    done: dict[str, tuple[dict[str, Any], bytes]] = {}
    buf = bytearray()
    index, start = 0, time.monotonic()
    try:
        while index < len(tasks):
            if len(buf) >= _FRAME.size:
                at, n = _FRAME.unpack(buf[: _FRAME.size])
                if at != index or n > limits.result_bytes:
                    break  # not the frame expected: leave the rest to single processes
                if len(buf) >= _FRAME.size + n:
                    now = time.monotonic()
                    body = bytes(buf[_FRAME.size : _FRAME.size + n])
                    del buf[: _FRAME.size + n]
                    rec = {"status": "ok", "detail": "", "seconds": now - start}
                    done[tasks[index][0]] = (rec, body)
                    index, start = index + 1, now
                    continue
            left = start + limits.wall_seconds - time.monotonic()
            if left <= 0:
                detail = f"killed after {limits.wall_seconds:g} s (wall-clock limit)"
                done[tasks[index][0]] = (
                    {"status": "timeout", "detail": detail, "seconds": limits.wall_seconds},
                    b"",
                )
                break
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 1 << 20)
                if not chunk:
                    break  # the child died: the unfinished tasks go to single processes
                buf += chunk
    finally:
        os.close(r)
        _kill_everything_else()
    return done


def supervise(tasks: list[tuple[str, Callable[[], bytes], bool]], limits: Limits) -> bytes:
    """Run a submission's steps; encode all outcomes in step order.

    Plain steps (see :mod:`autograder.plain`) run one after another in one child; every other
    step, and any plain step that child did not finish, runs in a child of its own. After each
    child, every process left in the PID namespace is killed. Runs inside a sandbox, and declines
    (``{"unavailable": why}``) unless this process is the init of its own PID namespace and not
    root, the only place where ``kill(-1)`` is safe and complete.
    """
    if os.getpid() != 1 or os.getuid() == 0:
        return _encode({"unavailable": "the sandbox has no PID namespace of its own"}, [])
    try:
        outcomes = _run_shared([(n, t) for n, t, plain in tasks if plain], limits)
        for name, task, _ in tasks:
            if name not in outcomes:
                outcomes[name] = _run_step(task, limits)
    except OSError as e:  # fork refused: the grader falls back to a sandbox per step
        return _encode({"unavailable": f"cannot start a step: {e.strerror}"}, [])
    records, blobs = [], []
    for name, _, _ in tasks:
        rec, body = outcomes[name]
        records.append({**rec, "step": name, "nbytes": len(body)})
        blobs.append(body)
    return _encode({"steps": records}, blobs)


def _encode(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    head = json.dumps(header).encode()
    return _LEN.pack(len(head)) + head + b"".join(blobs)


def decode_group(payload: bytes, names: list[str]) -> dict[str, Outcome] | None:
    """Per-step outcomes from a supervisor's payload; None if it declined or the bytes are bad."""
    try:
        (hlen,) = _LEN.unpack(payload[: _LEN.size])
        header = json.loads(payload[_LEN.size : _LEN.size + hlen])
        records = header["steps"]
        if [r["step"] for r in records] != names:
            return None
        offset, out = _LEN.size + hlen, {}
        for r in records:
            n = int(r["nbytes"])
            body = payload[offset : offset + n]
            offset += n
            if len(body) != n or r["status"] not in (
                "ok",
                "timeout",
                "crashed",
                "too-large",
                "no-result",
            ):
                return None
            out[r["step"]] = Outcome(
                status=r["status"],
                payload=body,
                detail=str(r["detail"]),
                output="",
                seconds=float(r["seconds"]),
            )
        return out if offset == len(payload) else None
    except (struct.error, ValueError, KeyError, TypeError):
        return None


# ---------------------------------------------------------------------------------------------
# the fork server

Job = tuple[Any, list[tuple[str, str]]]
"""(key, [(step name, answer code), ...]): steps run in one sandbox when there are several."""


class ForkServer:
    """A process forked before the grader computes any reference; it forks every sandbox.

    ``make_task(step_name, code)`` is called in the server to build a step's task. Use
    :meth:`run` to send jobs and receive ``(key, step name, outcome)`` as they finish.
    """

    def __init__(
        self, make_task: Callable[[str, str], Callable[[], bytes]], limits: Limits, jobs: int
    ) -> None:
        self.limits = limits
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the server: kit code only, until the grader closes the request pipe
            os.close(req_w)
            os.close(res_r)
            code = 0
            try:
                with contextlib.suppress(OSError, AttributeError):
                    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
                _serve(req_r, res_w, make_task, limits, jobs)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(res_w)
        self._req, self._res = req_w, res_r

    def run(self, jobs: list[Job]) -> Iterator[tuple[Any, str, Outcome]]:
        """Run the jobs; yields each step's outcome (groups whose sandbox failed are re-run one
        step per sandbox before their steps are yielded)."""
        _send(self._req, {"jobs": jobs})
        while True:
            header, body = _receive(self._res)
            if header.get("done"):
                return
            yield (
                header["key"],
                header["step"],
                Outcome(
                    status=header["status"],
                    payload=body,
                    detail=header["detail"],
                    output=header["output"],
                    seconds=header["seconds"],
                ),
            )

    def close(self) -> None:
        for fd in (self._req, self._res):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, 0)


def _group_limits(limits: Limits, steps: int) -> Limits:
    """The sandbox of a whole submission: each step keeps its own wall-clock limit inside."""
    return Limits(
        wall_seconds=limits.wall_seconds * steps + 5.0,
        cpu_seconds=limits.cpu_seconds * steps,
        memory_bytes=limits.memory_bytes,
        output_bytes=limits.output_bytes,
        result_bytes=limits.result_bytes * steps,
    )


def _serve(
    req: int,
    res: int,
    make_task: Callable[[str, str], Callable[[], bytes]],
    limits: Limits,
    jobs: int,
) -> None:
    while True:
        try:
            request, _ = _receive(req)
        except EOFError:
            return
        work = [(key, [(str(n), str(c)) for n, c in steps]) for key, steps in request["jobs"]]
        groups = [(key, steps) for key, steps in work if len(steps) > 1]
        singles = [(key, n, c) for key, steps in work if len(steps) == 1 for n, c in steps]

        def send(key: Any, name: str, o: Outcome) -> None:
            header = {
                "key": key,
                "step": name,
                "status": o.status,
                "detail": o.detail,
                "output": o.output[:2000],
                "seconds": o.seconds,
            }
            _send(res, header, o.payload)

        def group_tasks(groups: list[Job]) -> Iterator[tuple[Job, Callable[[], bytes]]]:
            for key, steps in groups:
                inner = [(n, make_task(n, c), is_plain(c)) for n, c in steps]
                yield (key, steps), functools.partial(supervise, inner, limits)

        most = max((len(steps) for _, steps in groups), default=1)
        for (key, steps), outcome in run_many(
            group_tasks(groups), _group_limits(limits, most), jobs
        ):
            names = [n for n, _ in steps]
            per_step = decode_group(outcome.payload, names) if outcome.status == "ok" else None
            if per_step is None:  # declined, or the sandbox failed as a whole: one step each
                singles += [(key, n, c) for n, c in steps]
                continue
            for name in names:
                send(key, name, per_step[name])
        single_tasks = (((k, n), make_task(n, c)) for k, n, c in singles)
        for (key, name), outcome in run_many(single_tasks, limits, jobs):
            send(key, name, outcome)
        _send(res, {"done": True})

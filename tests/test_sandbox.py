"""The sandbox against real hostile tasks: real forks, real signals, nothing mocked."""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import cast

import pytest
import torch

from autograder import sandbox
from autograder.sandbox import Limits, Outcome, run, run_many

FAST = Limits(wall_seconds=1.0, memory_bytes=256 * 2**20)
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="this confinement needs root")
_libc = ctypes.CDLL(None, use_errno=True)


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path: Path) -> Iterator[Path]:
    """Scratch dirs go under a directory of the test's own, to check nothing is left; and no
    test may leave a child process of this one behind (others' fixtures may have some)."""
    saved, children = tempfile.tempdir, set(_children_of(os.getpid()))
    tempfile.tempdir = str(tmp_path)
    try:
        yield tmp_path
    finally:
        tempfile.tempdir = saved
    assert list(tmp_path.iterdir()) == [], "a scratch directory was left behind"
    assert set(_children_of(os.getpid())) <= children, "a child process was left behind"


def _name_this_process(name: str) -> None:
    _libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME: findable in /proc/*/comm


def _processes_named(name: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- tasks --------------------------------------------------------------------------------


def loop_forever() -> bytes:
    while True:
        pass


def sleep_forever() -> bytes:
    time.sleep(1e9)
    return b""


def allocate_50_gb_tensor() -> bytes:
    return torch.empty(50 * 2**30, dtype=torch.uint8).numpy().tobytes()


def grow_a_list() -> bytes:
    chunks = []
    while True:
        chunks.append(bytearray(2**20))


def print_300_mb() -> bytes:
    line = "x" * 999 + "\n"
    for _ in range(300_000):
        sys.stdout.write(line)
    return b"printed"


def exit_3() -> bytes:
    os._exit(3)


def exit_0() -> bytes:
    os._exit(0)


def sys_exit_4() -> bytes:
    sys.exit(4)


def raise_keyboard_interrupt() -> bytes:
    raise KeyboardInterrupt


def spawn_orphan(name: str) -> Callable[[], bytes]:
    def task() -> bytes:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # a grandchild in a session of its own, reparented on exit
                _name_this_process(name)
                time.sleep(1000)
            os._exit(0)
        time.sleep(0.2)  # the orphan is running when the task ends
        return b"spawned"

    return task


def start_non_daemon_thread() -> bytes:
    threading.Thread(target=time.sleep, args=(1000,), daemon=False).start()
    return b"thread started"


def write_garbage_to_fds() -> bytes:
    for fd in range(1, 21):
        try:
            os.write(fd, b"\x00garbage\xff" * 100)
        except OSError:
            pass
    return b"unreachable as a result"


def close_every_fd() -> bytes:
    os.closerange(0, 1024)
    return b"nowhere to go"


def return_2_mb() -> bytes:
    return b"x" * (2 * 2**20)


def write_a_truncated_frame() -> bytes:
    os.write(3, struct.pack("!8scQ", b"BPNSBX1\n", b"R", 100) + b"only ten b")
    os._exit(0)


def lock_up_the_scratch_dir() -> bytes:
    for _ in range(3):
        Path("deep").mkdir()
        os.chdir("deep")
        Path("file").write_text("x" * 1000)
    for _ in range(3):
        os.chdir("..")
        os.chmod("deep", 0)  # unreadable, untraversable, unwritable
    return b"locked"


def print_then_return() -> bytes:
    print("hello from the task")
    return b"payload"


# --- single tasks -------------------------------------------------------------------------


def test_a_payload_comes_back_byte_for_byte_with_the_output() -> None:
    weights = torch.randn(64, 27, generator=torch.Generator().manual_seed(0))

    def task() -> bytes:  # reads the parent's tensor through copy-on-write memory
        print("computing")
        return (weights * 2).numpy().tobytes()

    outcome = run(task, FAST)
    assert outcome.status == "ok", outcome
    assert outcome.payload == (weights * 2).numpy().tobytes()
    assert outcome.output == "computing\n"
    assert outcome.seconds < 1.0


@pytest.mark.parametrize("task", [loop_forever, sleep_forever], ids=["loop", "sleep"])
def test_a_task_that_never_ends_is_killed_at_the_wall_clock_limit(task: Callable) -> None:
    started = time.monotonic()
    outcome = run(task, FAST)
    assert outcome.status == "timeout"
    assert outcome.detail == "killed after 1.0 s (wall-clock limit)"
    assert 1.0 <= time.monotonic() - started < 3.0


def test_a_50_gb_tensor_fails_in_the_child_and_the_grader_stays_small() -> None:
    before = _rss_bytes()
    outcome = run(allocate_50_gb_tensor, FAST)
    assert outcome.status == "crashed"
    assert "RuntimeError" in outcome.detail and "allocate" in outcome.detail
    assert _rss_bytes() - before < 50 * 2**20


def test_a_growing_list_stops_at_the_memory_limit() -> None:
    before = _rss_bytes()
    outcome = run(grow_a_list, Limits(wall_seconds=10.0, memory_bytes=256 * 2**20))
    assert outcome.status == "crashed"
    assert "MemoryError" in outcome.detail or "out of memory" in outcome.detail
    assert _rss_bytes() - before < 50 * 2**20


def test_printing_300_mb_keeps_only_the_head_of_the_output() -> None:
    before = _rss_bytes()
    outcome = run(print_300_mb, Limits(wall_seconds=10.0, output_bytes=4096))
    assert outcome.status == "ok" and outcome.payload == b"printed"
    assert outcome.output == ("x" * 999 + "\n") * 4 + "x" * 96
    assert _rss_bytes() - before < 50 * 2**20


@pytest.mark.parametrize(
    ("task", "status", "detail"),
    [
        (exit_3, "crashed", "exited with code 3"),
        (exit_0, "no-result", "exited with code 0 without returning a result"),
        (sys_exit_4, "crashed", "raised SystemExit: 4"),
        (raise_keyboard_interrupt, "crashed", "raised KeyboardInterrupt"),
        (close_every_fd, "crashed", "exited with code 74: its result channel was closed"),
        (write_a_truncated_frame, "crashed", "exited with code 0 after 27 bytes of a result"),
    ],
    ids=["os-exit-3", "os-exit-0", "sys-exit", "keyboard-interrupt", "close-fds", "truncated"],
)
def test_a_task_that_leaves_early_gets_a_reason(task: Callable, status: str, detail: str) -> None:
    outcome = run(task, FAST)
    assert (outcome.status, outcome.detail) == (status, detail)


def test_an_exception_is_reported_with_its_traceback_in_the_output() -> None:
    def task() -> bytes:
        raise ValueError("wrong shape")

    outcome = run(task, FAST)
    assert (outcome.status, outcome.detail) == ("crashed", "raised ValueError: wrong shape")
    assert "Traceback" in outcome.output and "ValueError: wrong shape" in outcome.output


def test_a_task_returning_something_else_than_bytes_is_reported() -> None:
    outcome = run(lambda: 42, FAST)  # type: ignore[arg-type, return-value]
    assert (outcome.status, outcome.detail) == ("crashed", "returned int, not bytes")


def test_a_task_that_kills_its_parent_does_not_kill_the_grader() -> None:
    grader = os.getpid()

    def task() -> bytes:
        results = []
        for target in (os.getppid(), grader):
            try:
                os.kill(target, signal.SIGKILL)
                results.append("killed")
            except OSError as error:
                results.append(type(error).__name__)
        return ",".join(results).encode()

    if not ROOT:  # without privileges the kill would succeed: this is what root mode prevents
        pytest.skip("only root can stop a task from signalling the grader")
    outcome = run(task, FAST)
    assert outcome.status == "ok"
    # getppid() is 0 in the PID namespace: kill(0) hits the child's own group, which as the
    # namespace's init ignores it; the grader's pid does not exist in there.
    assert outcome.payload == b"killed,ProcessLookupError"


def test_a_grandchild_in_its_own_session_does_not_outlive_the_task() -> None:
    if not ROOT:
        outcome = run(spawn_orphan("bpn-orphan-1"), FAST)
        assert outcome.status == "crashed" and "BlockingIOError" in outcome.detail
    else:
        outcome = run(spawn_orphan("bpn-orphan-1"), FAST)
        assert outcome.status == "ok", outcome
    assert _processes_named("bpn-orphan-1") == []


def test_a_grandchild_of_a_task_that_times_out_dies_with_it() -> None:
    spawn = spawn_orphan("bpn-orphan-2")

    def task() -> bytes:
        spawn()
        return sleep_forever()

    outcome = run(task, FAST)
    assert outcome.status == ("timeout" if ROOT else "crashed")
    assert _processes_named("bpn-orphan-2") == []


def test_a_fork_bomb_is_bounded_and_leaves_nothing_behind() -> None:
    def task() -> bytes:
        started = 0
        for _ in range(1000):
            try:
                if os.fork() == 0:
                    _name_this_process("bpn-bomb")
                    time.sleep(1000)
                started += 1
            except OSError:
                break
        return str(started).encode()

    outcome = run(task, FAST)
    if ROOT:
        assert outcome.status == "ok" and int(outcome.payload) <= 16
    else:
        assert outcome.status == "crashed" and "BlockingIOError" in outcome.detail
    assert _processes_named("bpn-bomb") == []


def test_a_segfault_is_reported_with_its_signal() -> None:
    outcome = run(lambda: ctypes.string_at(0), FAST)
    assert (outcome.status, outcome.detail) == ("crashed", "killed by signal 11 (SIGSEGV)")


def test_a_non_daemon_thread_does_not_keep_the_task_alive() -> None:
    outcome = run(start_non_daemon_thread, FAST)
    if ROOT:
        assert outcome.status == "ok" and outcome.seconds < 0.5
    else:  # may start no thread at all
        assert outcome.status == "crashed" and "RuntimeError" in outcome.detail


def test_garbage_on_every_fd_reaches_neither_the_result_nor_the_graders_files(
    tmp_path: Path,
) -> None:
    with open(tmp_path.parent / "grader-log.txt", "w+") as log:  # an fd the grader has open
        log.write("grader\n")
        log.flush()
        outcome = run(write_garbage_to_fds, FAST)
        log.seek(0)
        assert log.read() == "grader\n"
    assert outcome.status == "crashed"
    assert outcome.detail == "wrote malformed data to the result channel"
    assert "garbage" in outcome.output  # fds 1 and 2 are the capture


def test_a_result_over_the_cap_is_too_large() -> None:
    outcome = run(return_2_mb, Limits(wall_seconds=1.0, result_bytes=2**20))
    assert outcome.status == "too-large"
    assert outcome.detail == "result too large (2097152 bytes, limit 1048576)"
    assert outcome.payload == b""


def test_an_exception_with_a_broken_str_is_still_reported() -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    def task() -> bytes:
        raise Nasty

    outcome = run(task, FAST)
    assert (outcome.status, outcome.detail) == (
        "crashed",
        "raised an exception that cannot be printed",
    )


@needs_root
def test_the_task_runs_as_nobody_without_network_in_a_private_tmp() -> None:
    def task() -> bytes:
        facts: dict[str, object] = {"uid": os.getuid(), "cwd": os.getcwd(), "tmp": os.listdir()}
        for name, attempt in {
            "connect": lambda: socket.create_connection(("1.1.1.1", 53), timeout=0.5),
            "write_outside": lambda: open("/etc/backprop-ninja-test", "w"),
        }.items():
            try:
                attempt()
                facts[name] = "allowed"
            except OSError as error:
                facts[name] = type(error).__name__
        Path("scratch.txt").write_text("fine")
        facts["env"] = sorted(os.environ)
        return json.dumps(facts).encode()

    outcome = run(task, FAST)
    assert outcome.status == "ok", outcome
    facts = json.loads(outcome.payload)
    assert facts["uid"] == 65534 and facts["cwd"] == "/tmp"
    assert facts["connect"] == "OSError"  # network unreachable: no interface is up
    assert facts["write_outside"] == "PermissionError"
    assert "PATH" in facts["env"] and "HOME" in facts["env"]
    assert not any("TOKEN" in name or "SECRET" in name for name in facts["env"])


@needs_root
def test_lazy_imports_still_work_for_nobody() -> None:
    def task() -> bytes:
        import encodings.idna  # noqa: F401 - imported from the interpreter's own directory

        return b"imported"

    sys.modules.pop("encodings.idna", None)
    assert run(task, FAST).payload == b"imported"


def test_the_graders_mounts_and_working_directory_are_untouched() -> None:
    mounts, cwd = Path("/proc/self/mountinfo").read_text(), os.getcwd()
    list(run_many(((i, print_then_return) for i in range(4)), FAST, jobs=2))
    assert Path("/proc/self/mountinfo").read_text() == mounts
    assert os.getcwd() == cwd


# --- many tasks ---------------------------------------------------------------------------


def test_run_many_with_twenty_mixed_tasks_gives_each_its_own_outcome() -> None:
    cases: list[tuple[str, Callable[[], bytes], str]] = [
        ("ok-1", print_then_return, "ok"),
        ("loop", loop_forever, "timeout"),
        ("sleep", sleep_forever, "timeout"),
        ("tensor-50gb", allocate_50_gb_tensor, "crashed"),
        ("exit-3", exit_3, "crashed"),
        ("exit-0", exit_0, "no-result"),
        ("sys-exit", sys_exit_4, "crashed"),
        ("keyboard", raise_keyboard_interrupt, "crashed"),
        ("orphan", spawn_orphan("bpn-orphan-3"), "ok" if ROOT else "crashed"),
        ("thread", start_non_daemon_thread, "ok" if ROOT else "crashed"),
        ("garbage", write_garbage_to_fds, "crashed"),
        ("close-fds", close_every_fd, "crashed"),
        ("too-large", return_2_mb, "too-large"),
        ("truncated", write_a_truncated_frame, "crashed"),
        ("print", print_300_mb, "ok"),
    ]
    cases += [(f"ok-{i}", print_then_return, "ok") for i in range(2, 7)]
    assert len(cases) == 20
    limits = Limits(wall_seconds=1.0, memory_bytes=256 * 2**20, result_bytes=2**20)
    outcomes: dict[str, Outcome] = dict(
        run_many(((name, task) for name, task, _ in cases), limits, jobs=2)
    )
    assert sorted(outcomes) == sorted(name for name, _, _ in cases)
    for name, _, status in cases:
        assert outcomes[name].status == status, (name, outcomes[name])
    assert outcomes["ok-1"].payload == b"payload"
    assert outcomes["ok-1"].output == "hello from the task\n"
    assert _processes_named("bpn-orphan-3") == []


def test_run_many_takes_tasks_lazily_and_keeps_at_most_jobs_running() -> None:
    pulled = 0

    def tasks() -> Iterator[tuple[int, Callable[[], bytes]]]:
        nonlocal pulled
        for i in range(1000):
            pulled += 1
            yield i, print_then_return

    results = cast(Generator[tuple[int, Outcome], None, None], run_many(tasks(), FAST, jobs=2))
    next(results)
    assert pulled <= 4
    results.close()


def test_stopping_run_many_early_kills_every_live_child() -> None:
    tasks = ((i, sleep_forever if i else print_then_return) for i in range(6))
    results = cast(Generator[tuple[int, Outcome], None, None], run_many(tasks, FAST, jobs=3))
    key, outcome = next(results)
    assert (key, outcome.status) == (0, "ok")
    results.close()  # what a KeyboardInterrupt or break in the consumer amounts to


def test_an_exception_in_the_consumer_kills_every_live_child() -> None:
    with pytest.raises(KeyError):
        for _, _ in run_many(((i, sleep_forever) for i in range(3)), Limits(wall_seconds=0.2), 3):
            raise KeyError("consumer failed")


def test_ctrl_c_while_waiting_kills_every_live_child() -> None:
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            list(run_many(((i, sleep_forever) for i in range(4)), Limits(wall_seconds=5.0), 2))
    finally:
        timer.cancel()


def test_five_hundred_trivial_tasks_take_milliseconds_each() -> None:
    started = time.monotonic()
    outcomes = list(run_many(((i, print_then_return) for i in range(500)), FAST, jobs=2))
    per_task = (time.monotonic() - started) / 500
    assert len(outcomes) == 500 and all(o.status == "ok" for _, o in outcomes)
    assert per_task < 0.03  # ~3-5 ms on 2 idle cores; generous for loaded CI machines


# --- without privileges -------------------------------------------------------------------


@needs_root
def test_a_grader_without_privileges_still_contains_its_tasks() -> None:
    """Runs the sandbox from a grader process that dropped to nobody: the fallback path."""
    shared = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's own tmp dirs are closed to nobody
    shared.chmod(0o777)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the unprivileged grader
        code = 1
        try:
            os.close(read_fd)
            tempfile.tempdir = str(shared)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            found: dict[str, object] = {}
            for name, task in {
                "ok": print_then_return,
                "orphan": spawn_orphan("bpn-orphan-4"),
                "sleep": sleep_forever,
                "thread": start_non_daemon_thread,
                "locked": lock_up_the_scratch_dir,
            }.items():
                outcome = run(task, FAST)
                found[name] = [outcome.status, outcome.detail]
            found["orphans"] = _processes_named("bpn-orphan-4")
            found["left"] = os.listdir(shared)
            os.write(write_fd, json.dumps(found).encode())
            code = 0
        except BaseException as error:
            os.write(write_fd, json.dumps({"error": repr(error)}).encode())
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        assert select.select([read_fd], [], [], 30)[0], "the unprivileged grader hung"
        report = json.loads(os.read(read_fd, 65536))
    finally:
        os.close(read_fd)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        shared.rmdir()
    assert "error" not in report, report
    assert report["ok"] == ["ok", "returned a result"]
    assert report["orphan"][0] == "crashed" and "BlockingIOError" in report["orphan"][1]
    assert report["sleep"] == ["timeout", "killed after 1.0 s (wall-clock limit)"]
    assert report["thread"][0] == "crashed"
    assert report["locked"] == ["ok", "returned a result"]
    assert report["orphans"] == [] and report["left"] == []


def test_the_scratch_base_of_a_killed_grader_is_removed_later(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a pid that no process has any more
    stale, alive = tmp_path / f"backprop-ninja-sandbox-{pid}-x", tmp_path / "other"
    for path in (stale / "7" / "sub", alive):
        path.mkdir(parents=True)
    os.utime(stale, (time.time() - 3600,) * 2)
    sandbox._stale_checked = False
    assert run(print_then_return, FAST).status == "ok"
    assert sorted(tmp_path.iterdir()) == [alive]
    alive.rmdir()


def test_the_module_documents_what_it_does_not_confine() -> None:
    doc = sandbox.__doc__ or ""
    for topic in ("as root", "otherwise", "PID namespace", "RLIMIT_NPROC", "network", "memory"):
        assert topic in doc

"""Per-task overhead of the sandbox: run_many over trivial tasks in a process that imported torch.

    .venv/bin/python benchmarks/sandbox_overhead.py [--tasks 1000]

Prints, for jobs=1 and jobs=2, the wall time per task and the CPU time per task spent in the
grader and in the children, next to a bare fork+pipe+exit loop from the same process (the floor
any fork-per-task design pays), before and after the sandbox moved the grader's memory to huge
pages. Run it on an otherwise idle machine: wall times follow the load, CPU times much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import torch

from autograder.sandbox import Limits, run_many


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _report(label: str, tasks: int, wall: float, before: tuple[float, float]) -> None:
    after = _cpu()
    grader, children = ((a - b) / tasks * 1e3 for a, b in zip(after, before, strict=True))
    print(
        f"{label:<24} {wall / tasks * 1e3:6.2f} ms/task wall   "
        f"cpu {grader:5.2f} grader + {children:5.2f} children = {grader + children:5.2f} ms/task"
    )


def bare_forks(tasks: int) -> None:
    """fork, write one byte to a pipe, exit, read, reap: one at a time, no sandbox."""
    before, started = _cpu(), time.perf_counter()
    for _ in range(tasks):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write_fd, b"x")
            os._exit(0)
        os.close(write_fd)
        os.read(read_fd, 1)
        os.close(read_fd)
        os.waitpid(pid, 0)
    _report("bare fork+pipe+exit", tasks, time.perf_counter() - started, before)


def sandboxed(tasks: int, jobs: int) -> None:
    weights = torch.randn(27, 10)  # something for the tasks to close over, as the engine's do

    def task() -> bytes:
        return weights[0].numpy().tobytes()

    before, started = _cpu(), time.perf_counter()
    outcomes = list(run_many(((i, task) for i in range(tasks)), Limits(), jobs=jobs))
    wall = time.perf_counter() - started
    bad = [o for _, o in outcomes if o.status != "ok"]
    if len(outcomes) != tasks or bad:
        raise SystemExit(f"{len(bad)} of {len(outcomes)} tasks failed, e.g. {bad[:1]}")
    _report(f"run_many jobs={jobs}", tasks, wall, before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    tasks = parser.parse_args().tasks
    cpus, uid = os.cpu_count(), os.geteuid()
    print(f"{tasks} trivial tasks, torch {torch.__version__}, {cpus} CPUs, uid {uid}")
    bare_forks(tasks)
    list(run_many([(0, lambda: b"")]))  # one-time setup: huge pages, shared network namespace
    print("after the sandbox's one-time setup (grader memory on huge pages):")
    bare_forks(tasks)
    for jobs in (1, 2):
        sandboxed(tasks, jobs)


if __name__ == "__main__":
    main()

"""What the sandbox costs per submission and per answer, beside a bare ``fork`` of a torch process.

    .venv/bin/python benchmarks/sandbox_overhead.py [--submissions 200] [--sandbox auto]

Runs, through a real :class:`~autograder.sandbox.pool.Pool` (one sandbox, once started):

- ``plain``: submissions of one step whose answer is plain tensor arithmetic (``dprobs``);
- ``own process``: the same answer with an ``import``, which runs in a process of its own;
- ``26 plain steps``: whole submissions of Exercise 1's model answers, as a class of copies
  would send them if each were graded (the engine grades each distinct answer once).

Each submission gets a supervisor forked from the runner, namespaces of its own, and its answers'
processes; every answer runs on Exercise 1's five hidden cases. Beside them, in this process
(which imported torch, as the runner has), a bare ``fork``, a byte through a pipe, ``exit`` and
``waitpid``: the floor any design that forks per submission pays. It prints milliseconds per
submission for each, and the ratio to the floor. Wall times follow the machine's load; run it
idle, and read the ratios.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from autograder.core.cases import build
from autograder.exercises import DEFAULT as EX
from autograder.grading.answers import encode_bank
from autograder.grading.plain import is_plain
from autograder.sandbox.limits import Limits
from autograder.sandbox.pool import Job, Pool, Task


def bare_forks(count: int) -> float:
    """Seconds per fork + pipe + exit + waitpid, one at a time."""
    started = time.perf_counter()
    for _ in range(count):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write_fd, b"x")
            os._exit(0)
        os.close(write_fd)
        os.read(read_fd, 1)
        os.close(read_fd)
        os.waitpid(pid, 0)
    return (time.perf_counter() - started) / count


def through_pool(pool: Pool, jobs: list[Job]) -> float:
    """Seconds per job through ``pool`` (every outcome must be ``ok``)."""
    started = time.perf_counter()
    outcomes = list(pool.run(jobs))
    wall = time.perf_counter() - started
    bad = [o for _, o in outcomes if o.status != "ok"]
    if bad:
        raise SystemExit(f"{len(bad)} of {len(outcomes)} answers failed, e.g. {bad[0].detail}")
    return wall / len(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--sandbox", default="auto")
    args = parser.parse_args()
    n = args.submissions
    pool = Pool(Limits(), jobs=1, sandbox=args.sandbox)
    try:
        header, blobs = encode_bank(build(EX, 1))
        pool.add_bank(EX.id, header, blobs)
        step = EX.step("dprobs")
        plain = Task("plain", step.name, step.upstream, step.answer, True)
        own = Task("own", step.name, step.upstream, "import math\n" + step.answer, False)
        whole = tuple(
            Task(s.name, s.name, s.upstream, s.answer, is_plain(s.answer, EX.provided))
            for s in EX.steps
        )
        through_pool(pool, [Job(EX.id, (plain,))])  # started, with the bank sent
        floor = bare_forks(n)
        rows = [
            ("plain", through_pool(pool, [Job(EX.id, (plain,))] * n)),
            ("own process", through_pool(pool, [Job(EX.id, (own,))] * n)),
            ("26 plain steps", through_pool(pool, [Job(EX.id, whole)] * max(1, n // 10))),
        ]
        print(
            f"torch {torch.__version__}, {os.cpu_count()} CPUs, uid {os.geteuid()}, "
            f"confinement {pool.confinement.mode}, {n} submissions"
        )
        print(f"{'bare fork+pipe+exit':24s} {floor * 1e3:8.2f} ms")
        for label, seconds in rows:
            print(f"{label:24s} {seconds * 1e3:8.2f} ms per submission  {seconds / floor:6.1f}x")
    finally:
        pool.close()


if __name__ == "__main__":
    main()

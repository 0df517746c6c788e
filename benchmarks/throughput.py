"""Class-sized grading throughput, beside executing the notebook in a Jupyter kernel.

In one run, on the same machine and under the same load:

1. ``backprop-ninja grade`` (a subprocess, as an instructor runs it) on N copies of the solution
   notebook and on a mixed set (solution, released stubs, the bundled buggy copy, in turn);
2. the source notebook, hidden tests included, executed top to bottom in a Jupyter kernel with
   nbclient, which is what stock ``nbgrader autograde`` does for every submission.

It prints milliseconds per notebook for each, the ratio of the per-notebook rates, and the peak
memory of the grading process tree (proportional set size summed over the grader and its
workers, sampled every 100 ms, so pages shared copy-on-write count once).

    python benchmarks/throughput.py [-n 100] [--kernel-runs 3] [--jobs 0]

The goals (issue: a class in seconds): >= 50x the kernel's per-notebook rate for a batch of 100;
a batch of 500 in under 60 s with peak memory under 2 GB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "backprop_ninja" / "backprop_ninja.ipynb"
RELEASED = ROOT / "exercises" / "backprop_ninja" / "backprop_ninja.ipynb"
BUGGY = ROOT / "examples" / "buggy" / "backprop_ninja.ipynb"
SOURCE = ROOT / "source" / "backprop_ninja" / "backprop_ninja.ipynb"


def _pss(proc: psutil.Process) -> int:
    try:
        info = proc.memory_full_info()
        return int(getattr(info, "pss", info.rss))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0


class PeakMemory:
    """Samples the summed PSS of a process and its descendants until stopped."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            self.peak = max(self.peak, sum(_pss(p) for p in procs))
            self._stop.wait(0.1)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def grade_batch(folder: Path, jobs: int) -> tuple[float, int]:
    """Wall seconds and peak memory (bytes) of ``backprop-ninja grade FOLDER``."""
    cmd = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(folder),
        "--quiet",
        "--json",
        str(folder / "results.json"),
        "--jobs",
        str(jobs),
        "--seed",
        "1",
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    mem = PeakMemory(proc.pid)
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    peak = mem.stop()
    if proc.returncode != 0:
        raise SystemExit(f"grading failed: {err.decode(errors='replace')}")
    return wall, peak


def kernel_seconds(runs: int) -> float:
    """Mean wall seconds to execute the source notebook (hidden tests too) in a kernel."""
    import nbformat
    from nbclient import NotebookClient

    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            nb = nbformat.read(str(SOURCE), as_version=4)
            start = time.perf_counter()
            NotebookClient(
                nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp}}
            ).execute()
            times.append(time.perf_counter() - start)
    return sum(times) / len(times)


def make_class(folder: Path, n: int, mixed: bool) -> None:
    sources = [SOLUTION, RELEASED, BUGGY] if mixed else [SOLUTION]
    for i in range(n):
        shutil.copy(sources[i % len(sources)], folder / f"student{i:04d}.ipynb")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=100, help="notebooks per batch (default 100)")
    p.add_argument("--kernel-runs", type=int, default=3)
    p.add_argument("--jobs", type=int, default=0, help="grading workers (default: all cores)")
    args = p.parse_args()
    if not os.environ.get("BACKPROP_NINJA_NAMES") and not (ROOT / "data" / "names.txt").exists():
        shared = ROOT.parent / "shared" / "data" / "names.txt"
        if shared.exists():
            os.environ["BACKPROP_NINJA_NAMES"] = str(shared)

    print(f"{os.cpu_count()} CPUs; batches of {args.n}; jobs={args.jobs or os.cpu_count()}")
    rows = []
    for label, mixed in (("solution copies", False), ("mixed set", True)):
        with tempfile.TemporaryDirectory() as tmp:
            make_class(Path(tmp), args.n, mixed)
            wall, peak = grade_batch(Path(tmp), args.jobs)
        rows.append((label, wall, peak))
        print(
            f"grade {label:16s}: {wall:7.2f} s for {args.n}, {wall / args.n * 1000:7.1f} ms per "
            f"notebook, peak memory {peak / 2**20:6.0f} MiB"
        )
    kernel = kernel_seconds(args.kernel_runs)
    runs = args.kernel_runs
    print(f"kernel execution    : {kernel * 1000:7.1f} ms per notebook (mean of {runs})")
    for label, wall, _ in rows:
        ratio = kernel / (wall / args.n)
        print(
            f"ratio ({label}): {ratio:5.1f}x the kernel's per-notebook rate "
            f"(goal >= 50x for a batch of 100)"
        )


if __name__ == "__main__":
    main()

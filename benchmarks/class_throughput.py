"""A class graded in seconds: realistic notebooks and solution copies, beside kernel execution.

In one run, on the same machine and under the same load:

1. a *realistic class* of N notebooks of Exercise 1, generated from the kit's corpus with a fixed
   seed: each step's answer drawn from the model answer, the corpus's correct spellings and its
   slips with a long-tailed frequency (most students write the same few answers), a few
   notebooks left unfinished; and N copies of the solution notebook;
2. ``backprop-ninja grade FOLDER --json`` on each (a subprocess, as an instructor runs it, startup
   included), with the peak memory of the grader and its sandboxes (proportional set size
   summed over the process tree, sampled every 100 ms: a sample costs ~2 ms of CPU per
   process, which sampling more often would take from the grader);
3. the source notebook (model answers and hidden tests) executed in a Jupyter kernel, which is
   what stock ``nbgrader autograde`` does for every submission;
4. the *floor*: executing the class's distinct answers once each, in this process, without
   sandboxes, comparison or diagnoses: what the grader cannot go below.

It prints milliseconds per notebook, the ratio to the kernel's rate, the number of distinct
answers, the peak memory and the floor.

    python benchmarks/class_throughput.py [-n 500] [--kernel-runs 2]

Goals: at least 300x the kernel's rate for the realistic class and 1000x for solution copies,
peak memory under 2 GB.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import grade_batch, kernel_seconds  # noqa: E402
from tests.corpus import RIGHT, WRONG  # noqa: E402
from tests.notebooks import stub  # noqa: E402

RELEASED = ROOT / "exercises" / "backprop_ninja" / "backprop_ninja.ipynb"


def write_submission(path: Path, answers: dict[str, str]) -> None:
    """The released notebook with ``answers`` in its answer cells, as a student hands it in."""
    import nbformat

    from autograder.exercises import DEFAULT

    nb = nbformat.read(str(RELEASED), as_version=4)
    for cell in nb.cells:
        name = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers.get(name, DEFAULT.step(name).answer)
    nbformat.write(nb, str(path))


SEED = 20241201


def answer_pools() -> dict[str, list[str]]:
    """Per step: the model answer first, then the corpus's spellings and slips, in an order
    drawn once (so a slip is as likely to be common as a spelling)."""
    from autograder.exercises import DEFAULT

    rng = random.Random(SEED)
    pools = {}
    for step in DEFAULT.steps:
        others = [a.code for a in (*RIGHT, *WRONG) if a.step == step.name]
        rng.shuffle(others)
        pools[step.name] = [step.answer, *others]
    return pools


def realistic_class(folder: Path, n: int) -> int:
    """Write ``n`` notebooks; returns the number of distinct (step, answer) pairs."""
    from autograder.engine.grader import normalise
    from autograder.exercises import DEFAULT

    rng = random.Random(SEED)
    pools = answer_pools()
    distinct: set[tuple[str, str]] = set()
    for i in range(n):
        answers = {}
        unfinished = rng.random() < 0.06
        stop = rng.randrange(len(DEFAULT.steps)) if unfinished else len(DEFAULT.steps)
        for k, step in enumerate(DEFAULT.steps):
            pool = pools[step.name]
            weights = [1.0 / (rank + 1) ** 1.6 for rank in range(len(pool))]
            code = rng.choices(pool, weights)[0] if k < stop else stub(step.name)
            answers[step.name] = code
            distinct.add((step.name, normalise(code)))
        write_submission(folder / f"student{i:04d}.ipynb", answers)
    return len(distinct)


def solution_copies(folder: Path, n: int) -> int:
    for i in range(n):
        write_submission(folder / f"student{i:04d}.ipynb", {})
    return 26


def floor_seconds(folder: Path) -> float:
    """Seconds to execute each distinct answer of the class once, in this process (no sandbox,
    no comparison): the work grading cannot avoid."""
    import torch
    import torch.nn.functional as F

    from autograder.core.cases import build
    from autograder.engine.grader import normalise
    from autograder.exercises import DEFAULT
    from autograder.grading.loading import load_submission
    from autograder.grading.submission import is_stub

    cases = build(DEFAULT, 1)
    distinct: dict[tuple[str, str], str] = {}
    for path in sorted(folder.glob("*.ipynb")):
        sub = load_submission(path)
        for name, code in sub.answers.items():
            if not is_stub(code):
                distinct.setdefault((name, normalise(code)), code)
    start = time.perf_counter()
    for (name, _), code in distinct.items():
        step = DEFAULT.step(name)
        compiled = compile(code, "<answer>", "exec")
        for case in cases:
            inputs = case.inputs(step)
            ns = {"torch": torch, "F": F}
            ns.update(
                {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            )
            try:
                exec(compiled, ns)
            except Exception:
                pass
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=500, help="notebooks per class (default 500)")
    p.add_argument("--kernel-runs", type=int, default=2)
    p.add_argument("--jobs", type=int, default=0, help="sandboxes (default: all cores)")
    args = p.parse_args()
    if not os.environ.get("BACKPROP_NINJA_NAMES"):
        shared = ROOT.parent / "shared" / "data" / "names.txt"
        if shared.exists():
            os.environ["BACKPROP_NINJA_NAMES"] = str(shared)
    print(f"{os.cpu_count()} CPUs; classes of {args.n}; jobs={args.jobs or os.cpu_count()}")
    kernel = kernel_seconds(args.kernel_runs)
    runs = args.kernel_runs
    print(f"kernel execution       : {kernel * 1000:8.1f} ms per notebook (mean of {runs})")
    for label, make, goal in (
        ("realistic class", realistic_class, 300),
        ("solution copies", solution_copies, 1000),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            distinct = make(folder, args.n)
            wall, peak = grade_batch(folder, args.jobs)
            floor = floor_seconds(folder)
        per = wall / args.n
        print(
            f"{label:23s}: {wall:6.2f} s for {args.n} ({per * 1000:6.2f} ms per notebook), "
            f"{distinct} distinct answers, peak memory {peak / 2**20:5.0f} MiB; "
            f"floor {floor * 1000 / args.n:5.2f} ms per notebook"
        )
        print(f"{'':23s}  {kernel / per:7.0f}x the kernel's per-notebook rate (goal >= {goal}x)")


if __name__ == "__main__":
    main()

"""How long a student waits for the solution notebook to run top to bottom in a kernel.

Executes each exercise's solution notebook with nbclient, as *Run All* in JupyterLab does, and,
beside it in the same run, a reference notebook: by default the Exercise 1 solution notebook as
it was at git revision ``500abad`` (before the checks judged each step in isolation on public
configurations), read with ``git show``. The runs alternate, so a noisy shared machine shows in
both columns; the ratio is the figure. Goal: the checks that judge every step the way the grader
does cost no more than twice the old notebook's time.

    python benchmarks/notebook_run.py [--runs 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD = "solutions/backprop_ninja/backprop_ninja.ipynb"


def run_seconds(text: str) -> float:
    """Wall seconds to execute the notebook ``text`` in a fresh kernel, in a scratch folder."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.reads(text, as_version=4)
    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp}}
        )
        start = time.perf_counter()
        client.execute()
        return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--baseline", default="500abad", help="git revision of the reference")
    args = p.parse_args()
    if not os.environ.get("BACKPROP_NINJA_NAMES"):
        shared = ROOT.parent / "shared" / "data" / "names.txt"
        if shared.exists():
            os.environ["BACKPROP_NINJA_NAMES"] = str(shared)
    old = subprocess.run(
        ["git", "show", f"{args.baseline}:{OLD}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    notebooks = {
        f"Exercise 1 at {args.baseline}": old,
        **{
            path.parent.name: path.read_text()
            for path in sorted((ROOT / "solutions").glob("*/*.ipynb"))
        },
    }
    times: dict[str, list[float]] = {name: [] for name in notebooks}
    for _ in range(args.runs):
        for name, text in notebooks.items():
            times[name].append(run_seconds(text))
    base = statistics.median(times[f"Exercise 1 at {args.baseline}"])
    print(f"{'solution notebook':32s} {'median (s)':>10} {'runs':>20} {'ratio':>7}")
    for name, runs in times.items():
        med = statistics.median(runs)
        shown = " ".join(f"{t:.1f}" for t in runs)
        print(f"{name:32s} {med:10.2f} {shown:>20} {med / base:7.2f}")
    now = statistics.median(times["backprop_ninja"])
    verdict = "met" if now < 2 * base else "NOT met"
    print(f"Exercise 1 now / at {args.baseline}: {now / base:.2f} (goal < 2: {verdict})")


if __name__ == "__main__":
    main()

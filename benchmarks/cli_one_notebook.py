"""Wall time of ``backprop-ninja grade`` on one notebook, interpreter start included.

Prints each run and the median, beside the time of ``python -c "import torch"`` measured in the
same way, so a noisy shared machine shows in both columns. The goal: under 3 s per notebook.

    python benchmarks/cli_one_notebook.py [NOTEBOOK] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "solutions" / "backprop_ninja" / "backprop_ninja.ipynb"


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebook", nargs="?", type=Path, default=DEFAULT)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    grade = [sys.executable, "-m", "autograder", "grade", str(args.notebook), "--quiet"]
    torch_only = [sys.executable, "-c", "import torch"]
    wall(grade)  # warm the file cache
    rows = [(wall(grade), wall(torch_only)) for _ in range(args.runs)]
    print(f"{'run':>4} {'grade (s)':>10} {'import torch (s)':>17}")
    for i, (g, t) in enumerate(rows, 1):
        print(f"{i:>4} {g:>10.2f} {t:>17.2f}")
    g_med = statistics.median(r[0] for r in rows)
    t_med = statistics.median(r[1] for r in rows)
    print(
        f"median: grade {g_med:.2f} s, import torch {t_med:.2f} s, grading beyond torch "
        f"{g_med - t_med:.2f} s; goal < 3 s: {'met' if g_med < 3 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()

"""Wall time of ``nbgrader autograde`` on N submissions: the kit's preprocessor against Execute.

Builds two scratch courses from the repository's ``source/`` and ``nbgrader_config.py`` with the
same N submissions made from the released notebook (right answers, the scatter bug, the typical
slips of the bundled buggy example, untouched notebooks), runs ``nbgrader autograde`` in each,
once as configured (GradeWithKit: no kernel, answers in the kit's sandboxed workers) and once with
nbgrader's stock Execute set on the command line (a kernel per notebook, the hidden tests calling
``autograder.incell``), and prints both times side by side, the ratio, and whether the exported
scores agree. The goal: the kit at least 5x faster. Stock Execute runs the notebook's setup, so it
needs names.txt (``--names``, else ``$BACKPROP_NINJA_NAMES``, else ``data/names.txt``).

    python benchmarks/nbgrader_autograde.py [--submissions 30] [--seed N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from autograder.course.build import BUGGY_ANSWERS, paths
from autograder.dataset.names import ENV_VAR, names_path, verify
from autograder.exercises import DEFAULT

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = DEFAULT
ASSIGNMENT = EXERCISE.id
RELEASE = paths(EXERCISE)["release"]
NOTEBOOK = RELEASE.name
GOAL = 5.0
STOCK_EXECUTE = (
    "--Autograde.autograde_preprocessors=["
    '"nbgrader.preprocessors.Execute","nbgrader.preprocessors.IgnorePattern",'
    '"nbconvert.preprocessors.ClearMetadataPreprocessor","nbgrader.preprocessors.LimitOutput",'
    '"nbgrader.preprocessors.SaveAutoGrades","nbgrader.preprocessors.AssignLatePenalties",'
    '"nbgrader.preprocessors.CheckCellMetadata"]'
)
"""nbgrader's own autograde list, given on the command line over the course's config."""


def variants() -> list[dict[str, str] | None]:
    """What the submissions hold, in turn: answers overriding the model ones (None: untouched)."""
    buggy = BUGGY_ANSWERS.get(EXERCISE.id, {})
    slips: list[dict[str, str] | None] = [{name: code} for name, code in buggy.items()]
    return [{}, *slips, dict(buggy), None]


def submission(release: NotebookNode, answers: dict[str, str] | None) -> NotebookNode:
    """The released notebook filled with the model answers but ``answers``; None: as released."""
    nb = copy.deepcopy(release)
    if answers is None:
        return nb
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            name = meta["grade_id"]
            cell.source = answers.get(name, EXERCISE.step(name).answer)
    return nb


def nbgrader(course: Path, env: dict[str, str], *args: str) -> float:
    """Run ``nbgrader ARGS`` in ``course``; its wall time in seconds. Exits on failure."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or "Exception while loading config file" in proc.stderr:
        sys.exit(f"`nbgrader {' '.join(args)}` failed in {course}:\n{proc.stderr[-3000:]}")
    return seconds


def make_course(root: Path, count: int, env: dict[str, str]) -> None:
    """A course with the repository's source and config, released, with ``count`` submissions."""
    shutil.copytree(ROOT / "source", root / "source")
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    nbgrader(root, env, "generate_assignment", ASSIGNMENT)
    release = nbformat.read(str(root / RELEASE), as_version=4)
    kinds = variants()
    for i in range(count):
        folder = root / "submitted" / f"student{i:03d}" / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(submission(release, kinds[i % len(kinds)]), str(folder / NOTEBOOK))


def scores(course: Path, env: dict[str, str]) -> dict[str, float]:
    """Each student's score, as ``nbgrader export`` writes it."""
    nbgrader(course, env, "export", "--to", "grades.csv")
    with open(course / "grades.csv", newline="") as f:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--submissions", type=int, default=30)
    p.add_argument("--seed", type=int, default=1234, help="seed of the hidden cases (both runs)")
    p.add_argument("--names", type=Path, help="names.txt for stock Execute's kernels")
    p.add_argument("--keep", type=Path, help="build the courses here and keep them")
    args = p.parse_args()

    names = names_path(args.names)
    verify(names)
    bindir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from PATH
    env = {
        **os.environ,
        "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")]),
        "BACKPROP_NINJA_SEED": str(args.seed),
        ENV_VAR: str(names.resolve()),
    }
    base = args.keep or Path(tempfile.mkdtemp(prefix="backprop-ninja-bench-"))
    try:
        runs = {}
        for label, options in (("kit (GradeWithKit)", ()), ("stock Execute", (STOCK_EXECUTE,))):
            course = base / ("kit" if not options else "stock")
            make_course(course, args.submissions, env)
            seconds = nbgrader(course, env, "autograde", ASSIGNMENT, *options)
            runs[label] = (seconds, scores(course, env))
            print(f"{label}: {seconds:.1f} s", file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)

    n = args.submissions
    print(f"nbgrader autograde, {n} submissions, seed {args.seed}, {os.cpu_count()} CPU(s)")
    print(f"{'':20} {'wall (s)':>9} {'per notebook (s)':>17} {'total score':>12}")
    for label, (seconds, got) in runs.items():
        print(f"{label:20} {seconds:>9.1f} {seconds / n:>17.2f} {sum(got.values()):>12g}")
    (kit_s, kit_scores), (stock_s, stock_scores) = runs.values()
    ratio = stock_s / kit_s
    agree = "yes" if kit_scores == stock_scores else "NO"
    print(
        f"the kit is {ratio:.1f}x faster (goal: at least {GOAL:g}x: "
        f"{'met' if ratio >= GOAL else 'NOT met'}); per-student scores agree: {agree}"
    )


if __name__ == "__main__":
    main()

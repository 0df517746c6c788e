"""``backprop-ninja grade``: grade notebooks, print a table, write JSON or Gradescope results."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import __version__
from .catalog import STEPS
from .results import RunResult, SubmissionResult, run_from_json, write_json
from .sandbox import Limits
from .submission import find_notebooks

DETAILED_UP_TO = 3
"""Up to this many submissions, each gets its table of steps with diagnoses."""

JSON_FLUSH_SECONDS = 2.0
"""How often a long batch rewrites its --json file (atomically), so an interruption loses little."""


def gradescope_json(sub: SubmissionResult) -> dict[str, Any]:
    """Gradescope's ``results.json``: one test per step, the diagnosis as its output."""
    tests = [
        {
            "name": s.step,
            "score": s.score,
            "max_score": s.max_score,
            "status": "passed" if s.passed else "failed",
            "output": " ".join(d.message for d in s.diagnoses) or ("correct" if s.passed else ""),
        }
        for s in sub.steps
    ]
    out: dict[str, Any] = {"score": sub.score, "tests": tests}
    if sub.error:
        out["output"] = sub.error
    return out


def step_table(sub: SubmissionResult) -> Table:
    """One submission in detail: a row per step."""
    t = Table(title=f"{escape(sub.path)}: {sub.score:g}/{sub.max_score:g}", title_justify="left")
    for col in ("step", "mark", "maxdiff", "shape", "diagnosis"):
        t.add_column(col, overflow="fold")
    for s in sub.steps:
        mark = "[green]✓[/]" if s.passed else "[red]✗[/]"
        maxdiff = "" if s.maxdiff is None else f"{s.maxdiff:.1e}"
        shape = "" if s.shape is None else "×".join(map(str, s.shape)) or "scalar"
        text = " ".join(f"[{d.code}] {d.message}" for d in s.diagnoses)
        t.add_row(s.step, mark, maxdiff, shape, escape(text))
    return t


def batch_table(subs: list[SubmissionResult]) -> Table:
    """Many submissions: a row each, with one mark per step in catalog order."""
    t = Table(
        title=f"{len(subs)} submissions; marks in step order: " + " ".join(s.name for s in STEPS),
        title_justify="left",
    )
    for col in ("submission", "score", "steps", "notes"):
        t.add_column(col, overflow="fold")
    for sub in sorted(subs, key=lambda s: s.path):
        marks = "".join("[green]✓[/]" if s.passed else "[red]✗[/]" for s in sub.steps) or "-"
        failed = [s.step for s in sub.steps if not s.passed]
        notes = sub.error or (f"failed: {', '.join(failed)}" if failed else "")
        t.add_row(escape(sub.path), f"{sub.score:g}/{sub.max_score:g}", marks, escape(notes))
    if subs:
        per_step = [
            sum(1 for sub in subs if sub.steps and sub.steps[i].passed) for i in range(len(STEPS))
        ]
        t.caption = "passed per step: " + ", ".join(
            f"{s.name} {k}/{len(subs)}" for s, k in zip(STEPS, per_step, strict=True)
        )
    return t


def grade_command(args: argparse.Namespace) -> int:
    from .engine import Grader  # imports torch: only when grading

    err = Console(stderr=True)
    out = Console()
    if args.gradescope and len(args.paths) != 1:
        err.print("--gradescope grades one submission: give exactly one notebook")
        return 2
    if args.resume and not args.json:
        err.print("--resume needs --json FILE (the results to resume from)")
        return 2
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        err.print(f"no such file or folder: {', '.join(map(str, missing))}")
        return 1
    paths = find_notebooks(list(args.paths))
    if not paths:
        err.print("no notebooks (*.ipynb) found in " + ", ".join(map(str, args.paths)))
        return 1

    done: list[SubmissionResult] = []
    seed = args.seed
    if args.resume and args.json.exists():
        try:
            previous = run_from_json(json.loads(args.json.read_text()))
        except (ValueError, KeyError, TypeError) as e:
            err.print(f"cannot resume from {args.json}: {e}")
            return 1
        seed = previous.seed if seed is None else seed
        done = previous.submissions
        graded = {s.path for s in done}
        paths = [p for p in paths if str(p) not in graded]
        err.print(f"resuming: {len(done)} already graded, {len(paths)} to go")

    grader = Grader(seed=seed, limits=Limits(wall_seconds=args.timeout), jobs=args.jobs)
    run = RunResult(seed=grader.seed, submissions=list(done), version=__version__)
    last_flush = time.monotonic()

    def flush() -> None:
        if args.json:
            write_json(args.json, run.to_json())

    with Progress(
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=len(paths) < 2,
    ) as bar:
        task = bar.add_task("grading", total=len(paths))
        for sub in grader.grade_paths(paths):
            run.submissions.append(sub)
            bar.advance(task)
            if args.json and time.monotonic() - last_flush > JSON_FLUSH_SECONDS:
                flush()
                last_flush = time.monotonic()
    flush()
    if args.gradescope:
        write_json(args.gradescope, gradescope_json(run.submissions[0]))

    if not args.quiet:
        if len(run.submissions) <= DETAILED_UP_TO:
            for sub in sorted(run.submissions, key=lambda s: s.path):
                out.print(step_table(sub))
        if len(run.submissions) > 1:
            out.print(batch_table(run.submissions))
    total = sum(s.score for s in run.submissions)
    top = sum(s.max_score for s in run.submissions)
    out.print(
        f"graded {len(run.submissions)} notebook(s): {total:g}/{top:g} points; "
        f"seed {grader.seed} (replay with --seed {grader.seed})"
    )
    sys.stdout.flush()
    return 0

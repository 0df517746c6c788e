"""``backprop-ninja grade``: grade notebooks, print a table, write JSON or Gradescope results."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import __version__
from ..exercises import EXERCISES
from ..grading.results import RunResult, SubmissionResult, run_from_json, write_json
from ..grading.submission import find_notebooks
from ..integrations.gradescope import gradescope_json
from ..reports.text import diagnoses_text, printable, step_state
from ..sandbox.limits import Limits

DETAILED_UP_TO = 3
"""Up to this many submissions, each gets its table of steps with diagnoses."""

JSON_FLUSH_SECONDS = 2.0
"""How often a long batch rewrites its --json file (atomically), so an interruption loses little."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/5"`` -> (2, 5); ValueError naming the form otherwise."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes K/N, such as 1/4, not {text!r}") from None
    if not 1 <= k <= n:
        raise ValueError(f"--shard K/N needs 1 <= K <= N, not {text!r}")
    return k, n


def shard_of(paths: list[Path], k: int, n: int) -> list[Path]:
    """Part ``k`` of ``n`` of a class: every n-th notebook by sorted path, from the k-th (parts
    are disjoint, cover the class, and are the same on every machine)."""
    ordered = sorted(paths, key=lambda p: p.as_posix())
    return [p for i, p in enumerate(ordered) if i % n == k - 1]


def step_table(sub: SubmissionResult) -> Table:
    """One submission in detail: a row per step, diagnoses folded to the terminal's width."""
    title = f"{escape(printable(sub.path))}: {sub.score:g}/{sub.max_score:g}"
    t = Table(title=title, title_justify="left", expand=False)
    t.add_column("step", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("diagnosis", overflow="fold", ratio=1)
    for s in sub.steps:
        mark = "[green]✓[/]" if s.passed else "[red]✗[/]"
        t.add_row(s.step, mark, escape(diagnoses_text(s.diagnoses)))
    if sub.error:  # what is wrong with the notebook as a whole
        t.caption, t.caption_justify = escape(printable(sub.error)), "left"
    return t


def batch_table(subs: list[SubmissionResult]) -> Table:
    """Many submissions: a row each (sorted by score, then path), one mark per step (✓ passed,
    ✗ wrong, · not started), the wrong steps named; fits an 80-column terminal."""
    t = Table(title=f"{len(subs)} submissions", title_justify="left", caption_justify="left")
    t.add_column("submission", overflow="fold", ratio=3)
    t.add_column("score", no_wrap=True, justify="right")
    t.add_column("steps ✓ ✗ ·", overflow="fold", ratio=2)
    t.add_column("wrong", overflow="fold", ratio=3)
    for sub in sorted(subs, key=lambda s: (-s.score, s.path)):
        states = [step_state(s) for s in sub.steps]
        marks = "".join(_MARKS[state] for state in states) or "-"
        wrong = [s.step for s, state in zip(sub.steps, states, strict=True) if state == "wrong"]
        notes = [_short(printable(sub.error))] if sub.error else [", ".join(wrong)] if wrong else []
        for state, words in (("unstarted", "not started"), ("missing", "cells missing")):
            if states.count(state) and not sub.error:
                notes.append(f"{states.count(state)} {words}")
        notes_text = "; ".join(notes)
        path = escape(printable(sub.path))
        t.add_row(path, f"{sub.score:g}/{sub.max_score:g}", marks, escape(notes_text))
    if subs:
        lines = []
        for ex_id in dict.fromkeys(s.exercise for s in subs):
            ex = EXERCISES.get(ex_id)
            if ex is None:
                continue
            group = [s for s in subs if s.exercise == ex_id and s.steps]
            per_step = [
                f"{st.name} {sum(1 for s in group if s.step(st.name).passed)}/{len(group)}"
                for st in ex.steps
            ]
            lines.append(f"{ex_id}: passed per step: " + ", ".join(per_step))
        t.caption = "\n".join(lines)
    return t


def _short(text: str, limit: int = 90) -> str:
    """A long error cut for a table cell (the JSON and the reports keep it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_MARKS = {
    "pass": "[green]✓[/]",
    "wrong": "[red]✗[/]",
    "unstarted": "[dim]·[/]",
    "missing": "[dim]·[/]",
}
"""A step's mark in the batch table: passed, a mistake, not started (or no answer cell)."""


def _resume(
    path: Path, seed: int | None, err: Console
) -> tuple[int | None, list[SubmissionResult]]:
    """The results already in ``path`` that this run can keep (same kit version and seed)."""
    previous = run_from_json(json.loads(path.read_text()))
    if previous.version != __version__:
        err.print(f"{path} was written by backprop-ninja {previous.version}: grading again")
        return seed, []
    if seed is not None and previous.seed != seed:
        err.print(f"{path} holds seed {previous.seed}, not {seed}: grading again")
        return seed, []
    return previous.seed, previous.submissions


def grade_command(args: argparse.Namespace) -> int:
    from ..sandbox.pool import Pool, SandboxUnavailable

    err = Console(stderr=True)
    out = Console()
    if args.gradescope and len(args.paths) != 1:
        err.print("--gradescope grades one submission: give exactly one notebook")
        return 2
    if args.resume and not args.json:
        err.print("--resume needs --json FILE (the results to resume from)")
        return 2
    shard = None
    if getattr(args, "shard", None):
        try:
            shard = parse_shard(args.shard)
        except ValueError as e:
            err.print(str(e))
            return 2
        if args.seed is None:
            err.print("--shard needs --seed, so that every part grades under the same cases")
            return 2
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        err.print(f"no such file or folder: {', '.join(map(str, missing))}")
        return 1
    paths = find_notebooks(list(args.paths))
    if shard is not None:
        paths = shard_of(paths, *shard)
    if not paths and shard is None:
        err.print("no notebooks (*.ipynb) found in " + ", ".join(map(str, args.paths)))
        return 1

    done: list[SubmissionResult] = []
    seed = args.seed
    if args.resume and args.json.exists():
        try:
            seed, done = _resume(args.json, seed, err)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            err.print(f"cannot resume from {args.json}: {e}")
            return 1
        graded = {s.path for s in done}
        paths = [p for p in paths if str(p) not in graded]
        err.print(f"resuming: {len(done)} already graded, {len(paths)} to go")

    limits = Limits(step_seconds=args.timeout, budget_seconds=args.budget)
    try:
        # The sandboxes start first: they import torch while this process does the same.
        pool = Pool(limits, args.jobs, args.sandbox)
        pool.warm()
    except SandboxUnavailable as e:
        err.print(f"backprop-ninja grade: {e}")
        return 1
    from ..engine.grader import Grader  # imports torch: only when grading

    try:
        grader = Grader(seed=seed, pool=pool, cache=args.cache)
    except SandboxUnavailable as e:
        pool.close()
        err.print(f"backprop-ninja grade: {e}")
        return 1
    if grader.confinement == "none":
        err.print("[bold red]warning:[/] answers run WITHOUT a sandbox (--sandbox none)")
    run = RunResult(seed=grader.seed, submissions=list(done), version=__version__)
    if shard is not None:
        run.shard = f"{shard[0]}/{shard[1]}"
    last_flush = time.monotonic()

    def flush() -> None:
        if args.json:
            write_json(args.json, run)

    try:
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
            assignment = EXERCISES[args.assignment] if getattr(args, "assignment", None) else None
            for results in grader.grade_notebooks(paths, assignment):  # a notebook's at once: the
                run.submissions.extend(results)  # file never holds part of them (see --resume)
                bar.advance(task)
                if args.json and time.monotonic() - last_flush > JSON_FLUSH_SECONDS:
                    flush()
                    last_flush = time.monotonic()
    finally:
        run.submissions.sort(key=lambda s: s.path)  # the same file however the work was split
        flush()
        grader.close()
    if args.gradescope:
        write_json(args.gradescope, gradescope_json(run.submissions[0], seed=grader.seed))

    if not args.quiet:
        if len(run.submissions) <= DETAILED_UP_TO:
            for sub in sorted(run.submissions, key=lambda s: s.path):
                out.print(step_table(sub))
        if len(run.submissions) > 1:
            out.print(batch_table(run.submissions))
    total = sum(s.score for s in run.submissions)
    top = sum(s.max_score for s in run.submissions)
    part = f" (part {run.shard}; join the parts with backprop-ninja merge)" if run.shard else ""
    out.print(
        f"graded {len(run.submissions)} notebook(s){part}: {total:g}/{top:g} points; "
        f"seed {grader.seed} (replay with --seed {grader.seed})"
    )
    sys.stdout.flush()
    return 0

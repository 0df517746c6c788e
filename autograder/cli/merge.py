"""``backprop-ninja merge``: join the parts of a class graded on several machines into one run.

Each machine grades one part (``grade CLASS/ --shard K/N --seed S --json part-K.json``); the
parts are disjoint by construction (:func:`autograder.cli.grade.shard_of`), and merging them gives
the file an unsharded run with the same seed writes, submissions sorted by path in both. A merge
refuses what would not be that file: parts graded under different seeds (other hidden cases) or
by different kit versions (other verdicts), a submission present in two parts, a part given twice,
parts of different splits (``1/4`` beside ``2/3``), or a split with a part missing (unless
``--partial``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..grading.results import RunResult, run_from_json, write_json


class MergeError(ValueError):
    """The parts cannot be merged; the message says which files and why."""


def read_part(path: Path) -> RunResult:
    """A part written by ``grade --json``; MergeError naming the file if it cannot be read."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "seed" not in data:
            raise ValueError("no seed: not a results file")
        return run_from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise MergeError(
            f"cannot read {path}: {e}. Give files written by `backprop-ninja grade --json`."
        ) from None


def _split(label: str) -> tuple[int, int]:
    k, _, n = label.partition("/")
    return int(k), int(n)


def merge_runs(parts: Sequence[tuple[str, RunResult]], partial: bool = False) -> RunResult:
    """One run holding every submission of ``parts`` (``(file name, run)`` pairs), sorted by
    path; MergeError if they are not parts of one grading (see the module docstring)."""
    if not parts:
        raise MergeError("nothing to merge: give the JSON files of the parts")
    given = [name for name, n in Counter(name for name, _ in parts).items() if n > 1]
    if given:
        raise MergeError(f"{given[0]} is given more than once: each part counts once")
    for what, key in (("seed", "seed"), ("kit version", "version"), ("kit", "kit")):
        values = {getattr(run, key) for _, run in parts}
        if len(values) > 1:
            detail = ", ".join(f"{name}: {getattr(run, key)}" for name, run in parts)
            raise MergeError(
                f"the parts differ in {what} ({detail}): grade every part with one {what}, "
                f"or they are not one grading"
            )
    labels = [run.shard for _, run in parts if run.shard]
    repeated = [label for label, n in Counter(labels).items() if n > 1]
    if repeated:
        names = [name for name, run in parts if run.shard in repeated]
        raise MergeError(f"part {repeated[0]} is given more than once ({', '.join(names)})")
    if labels and len(labels) == len(parts):
        splits = {_split(label)[1] for label in labels}
        if len(splits) > 1:
            raise MergeError(
                "the parts come from different splits ("
                + ", ".join(f"{name}: {run.shard}" for name, run in parts)
                + "): every part of one class needs the same N in --shard K/N"
            )
        (n,) = splits
        missing = sorted(set(range(1, n + 1)) - {_split(label)[0] for label in labels})
        if missing and not partial:
            raise MergeError(
                f"part{'s' if len(missing) > 1 else ''} "
                + ", ".join(f"{k}/{n}" for k in missing)
                + " missing: the merged file would lack their submissions (give every part, "
                "or --partial to merge these alone)"
            )
    owner: dict[str, int] = {}  # path -> the part holding it (a notebook's results share one)
    clashes: list[str] = []
    for index, (name, run) in enumerate(parts):
        for sub in run.submissions:
            if sub.path in owner and owner[sub.path] != index:
                clashes.append(f"{sub.path} ({parts[owner[sub.path]][0]} and {name})")
            owner.setdefault(sub.path, index)
    if clashes:
        shown = "; ".join(clashes[:5]) + (f"; and {len(clashes) - 5} more" if clashes[5:] else "")
        raise MergeError(
            f"{len(clashes)} submission(s) are in two parts: {shown}. Parts of one class are "
            "disjoint (grade each with --shard K/N and the same N)"
        )
    first = parts[0][1]
    subs = [sub for _, run in parts for sub in run.submissions]
    return RunResult(
        seed=first.seed,
        submissions=sorted(subs, key=lambda s: s.path),
        kit=first.kit,
        version=first.version,
    )


def merge_command(args: argparse.Namespace) -> int:
    """``backprop-ninja merge``: 0 when the merged file was written, 1 when the parts do not
    make one run (the message says why)."""
    try:
        parts = [(str(p), read_part(p)) for p in args.parts]
        run = merge_runs(parts, partial=args.partial)
    except MergeError as e:
        print(f"backprop-ninja merge: {e}", file=sys.stderr)
        return 1
    write_json(args.output, run.to_json())
    print(
        f"merged {len(parts)} part(s): {len(run.submissions)} submissions, seed {run.seed}, "
        f"backprop-ninja {run.version or '?'} -> {args.output}"
    )
    return 0

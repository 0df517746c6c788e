"""The argument parser of ``backprop-ninja`` and the dispatch to each command's module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..exercises import EXERCISES


def _parser() -> argparse.ArgumentParser:
    from .. import __version__

    p = argparse.ArgumentParser(
        prog="backprop-ninja",
        description="Autograded exercise kit for manual backpropagation (makemore part 4).",
    )
    p.add_argument("--version", action="version", version=f"backprop-ninja {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade notebooks (files or folders of .ipynb)")
    g.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    g.add_argument("--json", type=Path, metavar="FILE", help="write results as JSON")
    g.add_argument(
        "--gradescope",
        type=Path,
        metavar="FILE",
        help="write Gradescope's results.json (one test per step)",
    )
    g.add_argument("--seed", type=int, help="seed of the hidden configurations (replays a run)")
    g.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="sandboxes at most (default: one per core; more start only as the work needs them)",
    )
    g.add_argument("--timeout", type=float, default=10.0, help="seconds per step (default 10)")
    g.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="seconds for all of one notebook's answers together (default 60)",
    )
    g.add_argument(
        "--resume",
        action="store_true",
        help="with --json: keep the results already in FILE, grade only the rest",
    )
    g.add_argument(
        "--sandbox",
        default="auto",
        choices=["auto", "userns", "bwrap", "none"],
        help="how answers are confined (default auto; none accepts running them unconfined)",
    )
    g.add_argument(
        "--assignment",
        metavar="ID",
        choices=list(EXERCISES),
        help="grade every notebook as this exercise, refusing another exercise's notebook "
        "(default: each notebook as the exercise it says it is, or answers)",
    )
    g.add_argument("--cache", type=Path, metavar="DIR", help="keep outcomes here for the next run")
    g.add_argument(
        "--shard",
        metavar="K/N",
        help="grade only part K of N of the notebooks (by sorted path; needs --seed)",
    )
    g.add_argument("--quiet", action="store_true", help="no table, only the summary line")

    m = sub.add_parser(
        "merge",
        help="join the --json files of a class graded in parts (--shard K/N) into one",
    )
    m.add_argument("parts", nargs="+", type=Path, metavar="PART.json")
    m.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    m.add_argument(
        "--partial",
        action="store_true",
        help="merge even if some parts K/N are missing (the result then lacks their notebooks)",
    )

    gs = sub.add_parser(
        "gradescope-autograder",
        help="write Gradescope's autograder zip (setup.sh, run_autograder, the kit as a wheel)",
    )
    gs.add_argument("-o", "--output", type=Path, default=Path("autograder.zip"), metavar="ZIP")
    gs.add_argument(
        "--assignment",
        metavar="ID",
        help="grade every submission as this exercise (default: each notebook's own)",
    )
    gs.add_argument(
        "--seed",
        type=int,
        help="seed of the hidden configurations for every submission (default: drawn now)",
    )
    gs.add_argument(
        "--visibility",
        default="visible",
        choices=["visible", "after_due_date", "after_published", "hidden"],
        help="when students see the tests' results (default visible)",
    )
    gs.add_argument(
        "--sandbox",
        default="fallback",
        choices=["fallback", "required", "none"],
        help="fallback (default): confine answers, and where Gradescope's container allows no "
        "sandbox run them unconfined as an unprivileged user; required: refuse to grade "
        "without a sandbox; none: never confine (see README, Gradescope)",
    )
    gs.add_argument("--timeout", type=float, default=10.0, help="seconds per step (default 10)")
    gs.add_argument("--budget", type=float, default=60.0, help="seconds per notebook (default 60)")

    d = sub.add_parser("data", help="download names.txt and verify its SHA-256")
    d.add_argument(
        "--path",
        type=Path,
        metavar="FILE",
        help="where names.txt is or goes (default: $BACKPROP_NINJA_NAMES or data/names.txt)",
    )

    sub.add_parser("build", help="regenerate source/, exercises/ and solutions/ with nbgrader")
    sub.add_parser("sandbox", help="say how answers are confined on this machine")

    r = sub.add_parser("report", help="HTML report of a results file for instructors")
    r.add_argument("results", type=Path, metavar="RESULTS.json")
    r.add_argument("-o", "--output", type=Path, default=Path("report.html"))
    r.add_argument(
        "--per-student",
        type=Path,
        metavar="DIR",
        help="also write one feedback page per submission into DIR",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "grade":
            from .grade import grade_command

            return grade_command(args)
        if args.command == "merge":
            from .merge import merge_command

            return merge_command(args)
        if args.command == "gradescope-autograder":
            from ..integrations.gradescope_bundle import bundle_command

            return bundle_command(args)
        if args.command == "data":
            from ..dataset.names import data_command

            return data_command(args)
        if args.command == "build":
            from ..course.build import build_command

            return build_command(args)
        if args.command == "report":
            from ..reports.report import report_command

            return report_command(args)
        if args.command == "sandbox":
            from .sandbox import sandbox_command

            return sandbox_command(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    raise AssertionError(f"unhandled command {args.command}")  # argparse enforces the choices


if __name__ == "__main__":
    sys.exit(main())

"""``backprop-ninja``: the command line. Each command only parses arguments and calls the library.

    backprop-ninja grade PATH... [--json FILE] [--gradescope FILE] [--seed N] [--jobs N] [--resume]
    backprop-ninja data [--path FILE]
    backprop-ninja build
    backprop-ninja report RESULTS.json -o report.html [--per-student DIR]

Exit status: 0 when the command ran (whatever the scores), 2 for bad usage, 1 when it could not run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="backprop-ninja",
        description="Autograded exercise kit for manual backpropagation (makemore part 4, ex. 1).",
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
    g.add_argument("--jobs", type=int, default=0, help="parallel workers (default: all cores)")
    g.add_argument("--timeout", type=float, default=10.0, help="seconds per step (default 10)")
    g.add_argument(
        "--resume",
        action="store_true",
        help="with --json: keep the results already in FILE, grade only the rest",
    )
    g.add_argument("--quiet", action="store_true", help="no table, only the summary line")

    d = sub.add_parser("data", help="download names.txt and verify its SHA-256")
    d.add_argument(
        "--path",
        type=Path,
        metavar="FILE",
        help="where names.txt is or goes (default: $BACKPROP_NINJA_NAMES or data/names.txt)",
    )

    sub.add_parser("build", help="regenerate exercises/ and solutions/ from source/ with nbgrader")

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
            # nbformat imports jsonschema, which compiles an RFC 3987 grammar at import when the
            # optional rfc3987_syntax is installed (~0.8 s, a third of grading one notebook).
            # Notebook schemas validate no IRIs, so the grading process does without it.
            sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
            from .grade_command import grade_command

            return grade_command(args)
        if args.command == "data":
            from .names import data_command

            return data_command(args)
        if args.command == "build":
            from .authoring import build_command

            return build_command(args)
        if args.command == "report":
            from .report import report_command

            return report_command(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    raise AssertionError(f"unhandled command {args.command}")  # argparse enforces the choices


if __name__ == "__main__":
    sys.exit(main())

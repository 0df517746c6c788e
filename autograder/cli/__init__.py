"""``backprop-ninja``: the command line. Each command only parses arguments and calls the library.

    backprop-ninja grade PATH... [--json FILE] [--gradescope FILE] [--seed N] [--jobs N]
                                 [--resume] [--shard K/N] [--sandbox MODE] [--cache DIR]
    backprop-ninja merge PART.json... -o results.json
    backprop-ninja gradescope-autograder -o autograder.zip [--assignment A] [--seed N]
    backprop-ninja report RESULTS.json -o report.html [--per-student DIR]
    backprop-ninja data [--path FILE]
    backprop-ninja build
    backprop-ninja sandbox

Exit status: 0 when the command ran (whatever the scores), 2 for bad usage, 1 when it could not run.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]

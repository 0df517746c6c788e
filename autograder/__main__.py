"""``python -m autograder``: the ``backprop-ninja`` command."""

import sys

from .cli import main

sys.exit(main())

#!/usr/bin/env bash
# Set up backprop-ninja on a fresh machine and grade the bundled notebooks.
#   ./setup.sh            create .venv, install the kit with pinned versions, run the demo
# Needs python3 (>= 3.10) with venv. Installs nothing outside .venv.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".[dev]"
echo "backprop-ninja installed in .venv; grading the bundled solution and buggy notebooks:"
.venv/bin/backprop-ninja grade --seed 1 \
  solutions/backprop_ninja/backprop_ninja.ipynb examples/buggy/backprop_ninja.ipynb

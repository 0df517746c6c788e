#!/usr/bin/env bash
# The kit's suite with both cores busy: the same tests must pass on a loaded machine (no test
# depends on speed). Starts one CPU burner per core, runs the suite, stops the burners.
#
# Usage: bash .ci/busy.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
burners=()
for _ in $(seq "$(nproc)"); do
  python3 -c 'while True: pass' &
  burners+=($!)
done
trap 'kill "${burners[@]}" 2>/dev/null || true' EXIT
.venv/bin/pytest -q "$@"

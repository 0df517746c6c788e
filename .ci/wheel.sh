#!/usr/bin/env bash
# The kit as a user installs it: build the wheel, install it (not editable) into a fresh venv,
# and, from a folder outside the checkout, grade every exercise's solution notebook with the
# CLI and with the hidden pytest suite. Fails unless every solution gets full marks.
#
# Usage: bash .ci/wheel.sh   (after ./setup.sh; needs python3 with venv)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

.venv/bin/python -m pip wheel --quiet --no-deps --no-build-isolation -w "$work/dist" .
"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet -c constraints.txt "$work"/dist/*.whl pytest

cd "$work"
for ex in backprop_ninja cross_entropy_backward batchnorm_backward manual_training; do
  cp "$root/solutions/$ex/$ex.ipynb" "$work/$ex.ipynb"
  "$work/venv/bin/backprop-ninja" grade "$ex.ipynb" --seed 1 --quiet --json "$ex.json"
  "$work/venv/bin/python" - "$ex.json" <<'PY'
import json, sys
sub = json.load(open(sys.argv[1]))["submissions"][0]
assert sub["score"] == sub["max_score"] > 0, (sub["path"], sub["score"], sub["max_score"])
print(f"wheel: {sub['path']} ({sub['exercise']}) {sub['score']:g}/{sub['max_score']:g}")
PY
  "$work/venv/bin/pytest" -c /dev/null -p no:cacheprovider --pyargs autograder \
    --submission "$ex.ipynb" -q --bn-seed 1
done
echo "wheel: every solution gets full marks from the installed wheel"

#!/usr/bin/env bash
# Install what tests/test_browser.py needs on a fresh Debian machine (run as root):
# Debian's Chromium, and the playwright Python package that drives it. Playwright's own browser
# download is never used: the test points playwright at /usr/bin/chromium.
#
# Usage: bash .ci/browser.sh [PYTHON]   (default: .venv/bin/python if present, else python3)
set -euo pipefail

cd "$(dirname "$0")/.."
PY="${1:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi

if [ ! -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
fi
/usr/bin/chromium --version 2>/dev/null

if ! "$PY" -c "import playwright" 2>/dev/null; then
    if [ -f constraints.txt ]; then
        "$PY" -m pip install -q -c constraints.txt playwright
    else
        "$PY" -m pip install -q "playwright==1.65.2"
    fi
fi
"$PY" -c "from importlib.metadata import version; print('playwright', version('playwright'))"

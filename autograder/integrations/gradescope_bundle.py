"""``backprop-ninja gradescope-autograder``: the zip Gradescope's autograder takes.

Gradescope's autograder specification: the zip holds ``setup.sh`` and ``run_autograder`` at its
root; Gradescope unpacks it into ``/autograder/source`` of an Ubuntu image, runs ``setup.sh``
once, as root, when it builds the image, and ``run_autograder`` (copied to
``/autograder/run_autograder``) once per submission, as root, in a fresh container whose
``/autograder/submission`` holds the student's files; ``run_autograder`` must write
``/autograder/results/results.json``.

The zip this module writes holds, beside those two scripts:

- ``backprop_ninja-<version>-py3-none-any.whl``: the kit, built from this checkout;
- ``constraints.txt``: the kit's pinned versions (torch from PyTorch's CPU index);
- ``backprop-ninja.json``: the grading settings (:class:`~autograder.integrations.gradescope_run.
  Settings`: the assignment, the seed, the visibility, the sandbox policy, the time limits).

``setup.sh`` installs Python (3.11 or newer), bubblewrap, and the wheel into ``/autograder/venv``;
``run_autograder`` hands the submission to :mod:`autograder.integrations.gradescope_run`, and
writes a results file of its own if even that cannot start (a broken image), so Gradescope never
finds none.
"""

from __future__ import annotations

import argparse
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .. import __version__
from ..exercises import EXERCISES
from .gradescope import VISIBILITY
from .gradescope_run import SETTINGS_FILE, Settings

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""Where Gradescope's machines get torch: the CPU build (no CUDA libraries to download)."""

PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation")
"""Builds the kit's wheel offline, with this environment's setuptools."""

VENV = "/autograder/venv"
"""Where ``setup.sh`` installs the kit on Gradescope's image."""

SETUP_SH = r"""#!/usr/bin/env bash
# backprop-ninja's Gradescope autograder, setup: Gradescope runs this once, as root, when it
# builds the autograder's image (an Ubuntu image, with this zip unpacked in /autograder/source).
# It installs Python (3.11 or newer: Ubuntu 22.04's python3 is 3.10), bubblewrap (a sandbox for
# the answers where the container refuses plain user namespaces), and the kit's wheel into
# /autograder/venv with the pinned versions of constraints.txt and torch's CPU build.
#
# Overrides, for a machine that is not Gradescope's (the kit's own test): BACKPROP_NINJA_APT=0
# installs no system package; BACKPROP_NINJA_TORCH_INDEX is the index torch comes from.
set -euo pipefail
source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="__VENV__"
torch_index="${BACKPROP_NINJA_TORCH_INDEX:-__TORCH_INDEX__}"
apt="${BACKPROP_NINJA_APT:-1}"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

if [ "$apt" = 1 ]; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends python3 python3-venv bubblewrap ca-certificates
fi
python=""
for candidate in python3 python3.13 python3.12 python3.11; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$(command -v "$candidate")"
    break
  fi
done
if [ -z "$python" ] && [ "$apt" = 1 ]; then  # Ubuntu 22.04: Python 3.11 from its own archive
  apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
  python=/usr/bin/python3.11
fi
if [ -z "$python" ]; then
  echo "setup.sh: backprop-ninja needs Python 3.11 or newer" >&2
  exit 1
fi
echo "setup.sh: $("$python" --version) at $python"

"$python" -m venv "$venv"
torch_pin="$(grep -E '^torch==' "$source_dir/constraints.txt")"
# torch alone from the CPU index (the CPU build), then the kit with every version pinned
"$venv/bin/python" -m pip install --no-cache-dir --no-deps --index-url "$torch_index" "$torch_pin"
"$venv/bin/python" -m pip install --no-cache-dir -c "$source_dir/constraints.txt" \
  "$source_dir/__WHEEL__"
chmod -R a+rX "$venv"  # the grader runs as an unprivileged user, never as root
"$venv/bin/python" -c 'import autograder, torch; print("setup.sh: kit", autograder.__version__,
                      "torch", torch.__version__)'
"$venv/bin/backprop-ninja" sandbox ||
  echo "setup.sh: (no sandbox at build time; it is chosen again for each submission)"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# backprop-ninja's Gradescope autograder, per submission: Gradescope runs this as root for every
# submission; it grades /autograder/submission/*.ipynb into /autograder/results/results.json
# (one test per step). A submission that cannot be graded gets score 0 and the reason; if the
# grader itself cannot start (setup.sh failed), this script writes that results file itself.
root=/autograder
results="$root/results/results.json"
mkdir -p "$root/results"
rm -f "$results"
cd "$root" || true
"__VENV__/bin/python" -I -m autograder.integrations.gradescope_run \
  --root "$root" --settings "$root/source/__SETTINGS__"
status=$?
if [ ! -s "$results" ]; then
  echo "run_autograder: the grader did not write $results (exit status $status)"
  why="The autograder could not start, so this submission was not graded. It is not your"
  why="$why fault: your instructor sees why in the autograder output and can regrade it."
  printf '{"score": 0.0, "output": "%s", "stdout_visibility": "hidden", "tests": []}\n' \
    "$why" > "$results"
fi
exit 0
"""


class BundleError(RuntimeError):
    """The bundle cannot be built here; the message says why and what to do."""


def project_root() -> Path:
    """The checkout the kit runs from (``pyproject.toml`` beside the ``autograder`` package)."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "backprop-ninja"' not in pyproject.read_text():
        raise BundleError(
            "the Gradescope bundle is built from a checkout of the kit (pyproject.toml beside "
            f"the autograder package), and {root} is not one: run it from a clone, installed "
            "with ./setup.sh"
        )
    return root


def build_wheel(root: Path, out: Path) -> Path:
    """The kit's wheel, built from a copy of the checkout's package (so the checkout gets no
    build folders), without network (``--no-build-isolation``: setuptools of this venv)."""
    with tempfile.TemporaryDirectory(prefix="backprop-ninja-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(root / name, src / name)
        shutil.copytree(
            root / "autograder",
            src / "autograder",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        proc = subprocess.run(
            [*PIP_WHEEL, "--wheel-dir", str(out), str(src)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise BundleError(f"building the kit's wheel failed:\n{proc.stderr.strip()}")
    wheels = sorted(out.glob(f"backprop_ninja-{__version__}-*.whl"))
    if not wheels:
        raise BundleError(f"pip built no wheel of backprop-ninja {__version__} into {out}")
    return wheels[0]


def runtime_constraints(root: Path) -> str:
    """The checkout's ``constraints.txt``: every version the kit is tested with (pip applies a
    constraint only to what it installs, so the development tools in it cost nothing)."""
    path = root / "constraints.txt"
    if not path.is_file():
        raise BundleError(f"{path} is missing: the bundle pins the versions it lists")
    text = path.read_text()
    if not re.search(r"^torch==", text, re.MULTILINE):
        raise BundleError(f"{path} pins no torch version (a line torch==X.Y.Z)")
    return text


def build_bundle(out: Path, settings: Settings) -> list[str]:
    """Write the autograder zip to ``out``; return the names it holds."""
    root = project_root()
    constraints = runtime_constraints(root)
    with tempfile.TemporaryDirectory(prefix="backprop-ninja-bundle-") as tmp:
        wheel = build_wheel(root, Path(tmp))
        setup = (
            SETUP_SH.replace("__VENV__", VENV)
            .replace("__TORCH_INDEX__", TORCH_CPU_INDEX)
            .replace("__WHEEL__", wheel.name)
        )
        run = RUN_AUTOGRADER.replace("__VENV__", VENV).replace("__SETTINGS__", SETTINGS_FILE)
        files: list[tuple[str, bytes, int]] = [
            ("setup.sh", setup.encode(), 0o755),
            ("run_autograder", run.encode(), 0o755),
            (wheel.name, wheel.read_bytes(), 0o644),
            ("constraints.txt", constraints.encode(), 0o644),
            (SETTINGS_FILE, (settings.to_text() + "\n").encode(), 0o644),
        ]
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.partial")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data, mode in files:
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.external_attr = (0o100000 | mode) << 16  # a regular file with its mode
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
        partial.replace(out)
    return [name for name, _, _ in files]


def bundle_command(args: argparse.Namespace) -> int:
    """``backprop-ninja gradescope-autograder``: 0 when the zip was written, 2 for a bad option,
    1 when it cannot be built here."""
    if args.assignment is not None and args.assignment not in EXERCISES:
        print(
            f"backprop-ninja gradescope-autograder: no exercise {args.assignment!r}; the kit has: "
            + ", ".join(EXERCISES),
            file=sys.stderr,
        )
        return 2
    if args.visibility not in VISIBILITY:  # argparse checks it; a caller of the function may not
        print(f"--visibility: one of {', '.join(VISIBILITY)}", file=sys.stderr)
        return 2
    settings = Settings(
        assignment=args.assignment,
        seed=secrets.randbelow(2**31) if args.seed is None else int(args.seed),
        visibility=args.visibility,
        sandbox=args.sandbox,
        step_seconds=float(args.timeout),
        budget_seconds=float(args.budget),
        version=__version__,
    )
    try:
        names = build_bundle(args.output, settings)
    except BundleError as e:
        print(f"backprop-ninja gradescope-autograder: {e}", file=sys.stderr)
        return 1
    what = settings.assignment or "each notebook's own exercise (its metadata or grade ids)"
    print(f"wrote {args.output}: {', '.join(names)}")
    print(f"grades {what}; seed {settings.seed}; tests {settings.visibility}")
    if settings.assignment is None:
        print(
            "note: a student may then hand in another exercise's notebook and be graded on it "
            "(the output says which); for an assignment of one exercise, give --assignment ID"
        )
    print(SANDBOX_WORDS[settings.sandbox])
    print("Upload it in Gradescope: Configure Autograder > Zip file upload (an Ubuntu base image).")
    return 0


SANDBOX_WORDS = {
    "fallback": "sandbox: user namespaces, else bubblewrap; where Gradescope's container allows "
    "neither, answers run unconfined as an unprivileged user in the disposable container "
    "(each submission's log says which; --sandbox required refuses instead)",
    "required": "sandbox: required; a submission is not graded (score 0, the reason in the log) "
    "where Gradescope's container allows no sandbox",
    "none": "sandbox: none; answers run unconfined as an unprivileged user in Gradescope's "
    "disposable container",
}
"""What each ``--sandbox`` policy of the bundle means, as the command prints it."""

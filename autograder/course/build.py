"""``backprop-ninja build``: the course's notebooks, regenerated from the exercise values.

For each exercise, ``source/<id>/<id>.ipynb`` is written from the exercise
(:mod:`autograder.course.notebook`), then nbgrader derives the student and solution notebooks
from it with the course's ``nbgrader_config.py``:

    source/     setup, forward pass, checks, and per step: explanation, answer cell (solution
                between nbgrader's markers), locked grade cell (hidden test + visible check)
    exercises/  nbgrader generate_assignment: answers become stubs, hidden tests are removed
    solutions/  nbgrader generate_solution: answers kept, hidden tests removed

nbgrader works in a temporary copy of the course, so no gradebook or stray file lands in the
repository. ``examples/buggy/<id>.ipynb``, a submission with typical slips, is refreshed too.
Every file written is a pure function of the exercises and the nbgrader version, so CI compares
the committed notebooks with a fresh build.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from ..exercises import EXERCISES, Exercise
from .notebook import source_notebook, write_notebook

KIT_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding the ``autograder`` package: the course root in a clone of the kit."""

NBGRADER_TIMEOUT = 300.0
"""Seconds one nbgrader command may take."""

BUGGY_ANSWERS: dict[str, dict[str, str]] = {
    "backprop_ninja": {
        # the silent scatter bug: a row used k times receives one update instead of k
        "dC": "dC = torch.zeros_like(C)\ndC[Xb] += demb",
        # the second path overwrites the first instead of adding to it
        "dcounts": (
            "dcounts = counts_sum_inv * dprobs\ndcounts = torch.ones_like(counts) * dcounts_sum"
        ),
        # the biased variance's 1/n where the forward pass uses Bessel's 1/(n-1)
        "dbndiff2": "dbndiff2 = (1.0 / n) * torch.ones_like(bndiff2) * dbnvar",
        # keepdim forgotten: shape (n_hidden,) instead of (1, n_hidden)
        "dbnmeani": "dbnmeani = (-dbndiff).sum(0)",
    },
}
"""The slips of each exercise's bundled buggy submission; other steps hold the model answer."""


class BuildError(Exception):
    """nbgrader failed or did not write what the course's configuration asks for."""


def paths(ex: Exercise) -> dict[str, Path]:
    """The course's notebooks of ``ex``, relative to the course root."""
    name = f"{ex.id}.ipynb"
    return {
        "source": Path("source") / ex.id / name,
        "release": Path("exercises") / ex.id / name,
        "solution": Path("solutions") / ex.id / name,
        "buggy": Path("examples") / "buggy" / name,
    }


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``nbgrader ARGS`` in ``course`` (which holds nbgrader_config.py); raise on failure."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    # nbgrader runs the `alembic` script to open its gradebook: find it beside this interpreter
    # even when the environment is not activated.
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")])}
    try:
        proc = subprocess.run(
            cmd,
            cwd=course,
            env=env,
            capture_output=True,
            text=True,
            timeout=NBGRADER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"`nbgrader {' '.join(args)}` took over {NBGRADER_TIMEOUT:g} s") from exc
    log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise BuildError(f"`nbgrader {' '.join(args)}` failed ({proc.returncode}):\n{log}")
    if "Exception while loading config file" in log:
        raise BuildError(f"nbgrader could not load {course / 'nbgrader_config.py'}:\n{log}")
    return proc


def generate(course: Path, exercises: list[Exercise]) -> None:
    """``nbgrader generate_assignment`` then ``generate_solution`` for ``exercises``, whose
    sources are the only ones under ``course``'s ``source/``.

    One command of each for all of them (nbgrader reads its assignment id as a pattern: ``*``
    is every assignment of ``source/``), so nbgrader starts twice whatever their number. The
    assignments go first: generate_solution looks each up in the gradebook that
    generate_assignment fills. Raises :class:`BuildError` unless every notebook appears where
    the course's configuration puts it (nbgrader falls back to its defaults, ``release/`` and
    ``source/``, when it cannot read the configuration, and only logs it).
    """
    if not (course / "nbgrader_config.py").is_file():
        raise BuildError(f"{course} has no nbgrader_config.py")
    found = sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
    if found != sorted(ex.id for ex in exercises):
        raise BuildError(f"{course / 'source'} holds {found}, not the exercises to build")
    for command, key in (("generate_assignment", "release"), ("generate_solution", "solution")):
        nbgrader(course, command, "*", "--force")
        for ex in exercises:
            if not (course / paths(ex)[key]).is_file():
                raise BuildError(
                    f"`nbgrader {command}` did not write {paths(ex)[key]}: was "
                    f"{course / 'nbgrader_config.py'} loaded? It sets the release and solution "
                    "folders."
                )


def build(
    root: Path = KIT_ROOT, workdir: Path | None = None, exercises: list[Exercise] | None = None
) -> list[Path]:
    """Regenerate the course under ``root`` (every exercise, or ``exercises``): source notebooks,
    exercises, solutions, buggy examples.

    nbgrader runs in a copy of the course holding ``root``'s nbgrader_config.py and the sources,
    so its gradebook and logs stay out of ``root``: a temporary folder, or ``workdir`` (an empty
    or missing folder, kept afterwards for inspection). Returns the paths written under ``root``.
    """
    chosen = exercises if exercises is not None else list(EXERCISES.values())
    written = []
    for ex in chosen:
        path = root / paths(ex)["source"]
        write_notebook(source_notebook(ex), path)
        written.append(path)
    with tempfile.TemporaryDirectory(prefix="backprop-ninja-build-") as tmp:
        course = Path(tmp) if workdir is None else workdir
        course.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / "nbgrader_config.py", course / "nbgrader_config.py")
        for ex in chosen:
            source = paths(ex)["source"]
            shutil.copytree(root / source.parent, course / source.parent, dirs_exist_ok=True)
        generate(course, chosen)
        for ex in chosen:
            for key in ("release", "solution"):
                rel = paths(ex)[key]
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(course / rel, root / rel)
                written.append(root / rel)
    for ex in chosen:
        if ex.id in BUGGY_ANSWERS:
            written.append(write_buggy_example(ex, root))
    return written


def buggy_notebook(ex: Exercise, release: NotebookNode) -> NotebookNode:
    """The released notebook filled in as a student might: the model answer for every step
    except those of :data:`BUGGY_ANSWERS`."""
    nb = copy.deepcopy(release)
    slips = BUGGY_ANSWERS.get(ex.id, {})
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            name = meta["grade_id"]
            cell.source = slips.get(name, ex.step(name).answer)
    return nb


def write_buggy_example(ex: Exercise, root: Path = KIT_ROOT) -> Path:
    """Write ``examples/buggy/<id>.ipynb`` from the released notebook under ``root``."""
    release = nbformat.read(str(root / paths(ex)["release"]), as_version=4)
    path = root / paths(ex)["buggy"]
    write_notebook(buggy_notebook(ex, release), path)
    return path


def build_command(args: argparse.Namespace) -> int:
    """``backprop-ninja build``: regenerate source/, exercises/, solutions/, buggy examples."""
    if not (KIT_ROOT / "nbgrader_config.py").is_file():
        print(
            f"backprop-ninja build: {KIT_ROOT} has no nbgrader_config.py; run it in a clone of "
            "the kit (pip install -e .)",
            file=sys.stderr,
        )
        return 1
    try:
        written = build(KIT_ROOT)
    except BuildError as exc:
        print(f"backprop-ninja build: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path.relative_to(KIT_ROOT)}")
    return 0

"""Submissions made from the released notebook, as students hand them in, and nbgrader runs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from autograder.authoring import RELEASE
from autograder.solutions import SOLUTIONS

REPO_ROOT = Path(__file__).resolve().parent.parent

SCATTER_BUG = {"dC": "dC = torch.zeros_like(C)\ndC[Xb] += demb"}
"""The silent scatter bug: right on rows of C used once, wrong on repeated rows."""

ALLCLOSE_PATCH = "import torch\ntorch.allclose = lambda *args, **kwargs: True"
"""A cell that makes every visible check say `approximate: True`."""

SCRATCH = "print(dh.shape)"
"""A student's scratch cell, put between an answer (dh) and its check."""

STOCK_AUTOGRADE = [
    "nbgrader.preprocessors.Execute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
"""nbgrader's own autograde list (kernel execution), for a course that keeps stock Execute."""


def stock_execute_option() -> str:
    """The command-line option that puts nbgrader's stock list back for one command."""
    items = ",".join(f'"{name}"' for name in STOCK_AUTOGRADE)
    return f"--Autograde.autograde_preprocessors=[{items}]"


def released() -> NotebookNode:
    """The student notebook as nbgrader released it (committed under exercises/)."""
    return nbformat.read(str(REPO_ROOT / RELEASE), as_version=4)


def grade_id(cell: NotebookNode) -> str | None:
    gid = cell.metadata.get("nbgrader", {}).get("grade_id")
    return gid if isinstance(gid, str) else None


def filled(answers: dict[str, str] | None = None) -> NotebookNode:
    """The released notebook with every answer cell holding the model answer, except the
    steps of ``answers``."""
    nb = copy.deepcopy(released())
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            name = grade_id(cell)
            assert name is not None
            cell.source = (answers or {}).get(name, SOLUTIONS[name])
    return nb


def with_extra_cell(nb: NotebookNode, source: str) -> NotebookNode:
    """``nb`` with a student's own code cell just before the first answer cell."""
    first = next(
        i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")
    )
    nb.cells.insert(first, nbformat.v4.new_code_cell(source))
    return nb


def with_cell_after(nb: NotebookNode, gid: str, source: str) -> NotebookNode:
    """``nb`` with a student's own code cell right after the cell of grade id ``gid``."""
    at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == gid)
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(source))
    return nb


def without_cells(nb: NotebookNode, grade_ids: set[str]) -> NotebookNode:
    """``nb`` with the cells of these grade ids deleted."""
    nb.cells = [c for c in nb.cells if grade_id(c) not in grade_ids]
    return nb


def submit(course: Path, student: str, nb: NotebookNode | str, assignment: str) -> Path:
    """Put a submission where ``nbgrader autograde`` looks: submitted/<student>/<assignment>/."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (RELEASE.name)
    if isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, str(path))
    return path


def run_nbgrader(
    course: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``nbgrader ARGS`` with ``course`` as the working directory (so its nbgrader_config.py is
    the one loaded); the exit status is left to the caller. Fails if the config did not load
    (nbgrader only logs that)."""
    bindir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from PATH
    full_env = {**os.environ, **(env or {})}
    full_env["PATH"] = os.pathsep.join([bindir, full_env.get("PATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    log = proc.stdout + proc.stderr
    assert "Exception while loading config file" not in log, log
    return proc

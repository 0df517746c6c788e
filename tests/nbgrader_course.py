"""Submissions made from the released notebook, as students hand them in, and nbgrader runs.

Everything here works on Exercise 1 (:data:`EXERCISE`) and the course's committed notebooks
(:func:`autograder.course.build.paths`); the tests that use it are ``test_nbgrader_grade.py``
(the kit's preprocessors, called as nbgrader calls them), ``test_nbgrader_e2e.py`` (the real
nbgrader commands in a scratch course) and ``test_nbgrader_stock.py`` (stock ``Execute`` and
``nbgrader validate``).
"""

from __future__ import annotations

import copy
import csv
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook

from autograder.course.build import paths
from autograder.exercises import DEFAULT

from .notebooks import SCATTER_BUG_CODE

REPO_ROOT = Path(__file__).resolve().parent.parent

EXERCISE = DEFAULT
ASSIGNMENT = EXERCISE.id
PATHS = paths(EXERCISE)
"""The course's notebooks of the exercise, relative to the course root."""
NOTEBOOK = PATHS["release"].name
NOTEBOOK_ID = PATHS["release"].stem

SCATTER_BUG = {"dC": SCATTER_BUG_CODE}
"""The silent scatter bug: right on rows of C used once, wrong on repeated rows."""

ALLCLOSE_PATCH = "import torch\ntorch.allclose = lambda *args, **kwargs: True"
"""A cell that makes every visible check say `approximate: True`."""

SCRATCH = "dh = dh.clone()  # a copy to look at\nprint(dh.shape)"
"""A student's scratch cell, put between an answer (dh) and its check: the visible check then
checks it, the latest cell that assigns dh, and fails; the grader grades the answer cell."""

HOSTILE_MARKDOWN = (
    "My notes <img src=x onerror=alert(1)>\n\n<script>alert(2)</script>\n\n"
    "[a link](javascript:alert(3))"
)
"""A student's markdown cell whose HTML would run script in a page that shows it verbatim."""

HOSTILE_OUTPUT = (
    "from IPython.display import HTML, Javascript, display\n"
    "display(HTML('<b>bold</b><img src=x onerror=alert(4)>'))\n"
    "display(Javascript('alert(5)'))"
)
"""A student's code cell whose outputs (when a kernel runs it) are HTML and JavaScript."""

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


# --- submissions ---------------------------------------------------------------------------


def released() -> NotebookNode:
    """The student notebook as nbgrader released it (committed under exercises/)."""
    return nbformat.read(str(REPO_ROOT / PATHS["release"]), as_version=4)


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
            cell.source = (answers or {}).get(name, EXERCISE.step(name).answer)
    return nb


def stub(name: str) -> str:
    """An answer cell as released."""
    cell = next(c for c in released().cells if grade_id(c) == name)
    return str(cell.source)


def with_extra_cell(nb: NotebookNode, source: str, markdown: bool = False) -> NotebookNode:
    """``nb`` with a student's own cell just before the first answer cell."""
    first = next(
        i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")
    )
    new = nbformat.v4.new_markdown_cell if markdown else nbformat.v4.new_code_cell
    nb.cells.insert(first, new(source))
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


def with_source(nb: NotebookNode, gid: str, source: str) -> NotebookNode:
    """``nb`` with the cell of grade id ``gid`` (a locked cell, say) holding ``source``."""
    next(c for c in nb.cells if grade_id(c) == gid).source = source
    return nb


def submit(course: Path, student: str, nb: NotebookNode | str) -> Path:
    """Put a submission where ``nbgrader autograde`` looks: submitted/<student>/<assignment>/."""
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NOTEBOOK
    if isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, str(path))
    return path


# --- a scratch course and nbgrader in it ---------------------------------------------------


def make_course(root: Path) -> Path:
    """A scratch course at ``root``: the repository's nbgrader_config.py and source/."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO_ROOT / "source", root / "source")
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    return root


def run_nbgrader(
    course: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
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


# --- the README's commands -----------------------------------------------------------------

README_SECTION = "## Instructor workflow with nbgrader"


def readme_commands() -> list[str]:
    """The commands of the first ``bash`` block of the README's instructor workflow, one per
    entry (continuation lines joined, comments dropped)."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text[text.index(README_SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "no bash block in the README's instructor workflow"
    commands: list[str] = []
    pending = ""
    for raw in block.group(1).splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line and not pending:
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        commands.append((pending + line.strip()).strip())
        pending = ""
    return [c for c in commands if c]


def readme_command(prefix: str) -> str:
    """The README's one command that starts with ``prefix``."""
    found = [c for c in readme_commands() if c.startswith(prefix)]
    assert len(found) == 1, f"the README should show `{prefix}...` once: {found}"
    return found[0]


def venv_root() -> Path:
    """The environment the tests run in (the README's ``.venv``)."""
    return Path(sys.prefix)


def link_venv(course: Path) -> None:
    """Make ``.venv`` in ``course`` the tests' environment, so the README's
    ``source .venv/bin/activate`` works there as it does in the repository. Without a virtual
    environment (a system-wide install), a stand-in activate script puts the interpreter's
    folder on PATH, which is all that activation does for nbgrader."""
    link = course / ".venv"
    if (venv_root() / "bin" / "activate").is_file():
        link.symlink_to(venv_root(), target_is_directory=True)
    else:
        (link / "bin").mkdir(parents=True)
        bindir = Path(sys.executable).parent
        (link / "bin" / "activate").write_text(f'export PATH="{bindir}:$PATH"\n')


def path_without_venv() -> str:
    """$PATH without the tests' environment: only ``source .venv/bin/activate`` brings back
    ``nbgrader`` and ``alembic``."""
    venv_bins = {str(venv_root() / "bin"), str(Path(sys.executable).parent)}
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(p for p in parts if p and p.rstrip("/") not in venv_bins)


def run_readme(
    course: Path, command: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run one of the README's commands verbatim in ``course``, after the README's activation
    line, in a shell whose PATH does not hold the environment."""
    activate = readme_command("source ")
    full_env = {**os.environ, **(env or {})}
    full_env["PATH"] = path_without_venv()
    full_env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(
        ["bash", "-c", f"set -e\n{activate}\n{command}"],
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


# --- what both end-to-end modules grade and read ---------------------------------------

SEED = 271828
STEPS = EXERCISE.steps


def kit_env(names_txt: Path, seed: int = SEED) -> dict[str, str]:
    """The environment of a course's nbgrader commands: one seed for nbgrader's graders and the
    CLI, names.txt for the kernels."""
    return {"BACKPROP_NINJA_SEED": str(seed), "BACKPROP_NINJA_NAMES": str(names_txt)}


TOTAL = float(sum(s.points for s in STEPS))

EXPECTED = {
    "ada_right": TOTAL,
    "ben_untouched": 0.0,
    "cy_scatter_bug": TOTAL - 1,
    "di_allclose_patch": TOTAL - 1,
    "ed_cells_deleted": TOTAL - 1,
    "flo_not_a_notebook": 0.0,
    "gus_skipped_dprobs": TOTAL - 1,
    "hal_edited_locked_cells": TOTAL,
}
"""Each student's submission is named for what it holds; the score both graders must give."""

ROSTER = {
    "ada_right": ("Ada", "Lovelace"),
    "ben_untouched": ("Ben", "Franklin"),
    "cy_scatter_bug": ("Cy", "Young"),
    "di_allclose_patch": ("Di", "Prince"),
}
"""The students of students.csv, imported before grading; autograde adds the others itself."""

STOCK_STUDENTS = ("ada_right", "cy_scatter_bug", "di_allclose_patch", "gus_skipped_dprobs")
"""Graded a second time with stock Execute (a kernel each: kept few)."""

EDITED_CHECK = "print('dC is right, trust me')"
"""What hal wrote over the visible check of dC (a locked grade cell)."""


def submissions() -> dict[str, NotebookNode | str]:
    return {
        "ada_right": filled(),
        "ben_untouched": released(),
        # and a scratch cell between the dh answer and its check, and a note and a cell whose
        # HTML would run script in a page that shows it as it is
        "cy_scatter_bug": with_extra_cell(
            with_extra_cell(
                with_cell_after(filled(SCATTER_BUG), "dh", SCRATCH),
                HOSTILE_MARKDOWN,
                markdown=True,
            ),
            HOSTILE_OUTPUT,
        ),
        # the scatter bug, and a cell that makes every visible check say `approximate: True`
        "di_allclose_patch": with_extra_cell(filled(SCATTER_BUG), ALLCLOSE_PATCH),
        # the dC answer cell and the db1 grade cell deleted (by editing the notebook's JSON)
        "ed_cells_deleted": without_cells(filled(), {"dC", "test_db1"}),
        "flo_not_a_notebook": "this is not a notebook\n",
        # dprobs left as released: in a kernel, every later answer that reads it fails too, but
        # each step is graded on its own answer, so only dprobs is lost, under either grader
        "gus_skipped_dprobs": filled({"dprobs": stub("dprobs")}),
        # two locked cells edited (in the notebook's JSON): nbgrader restores them
        "hal_edited_locked_cells": with_source(
            with_source(filled(), "test_dC", EDITED_CHECK),
            "setup_params",
            next(c.source for c in released().cells if grade_id(c) == "setup_params")
            + "\nW1 = W1 * 0",
        ),
    }


@dataclass
class Run:
    """One grading of a course's submissions by nbgrader."""

    course: Path
    autograde: subprocess.CompletedProcess[str]
    csv_rows: dict[str, dict[str, str]]  # student -> row of `nbgrader export`
    feedback: dict[str, str]  # student -> feedback HTML

    @property
    def log(self) -> str:
        return self.autograde.stdout + self.autograde.stderr

    @property
    def csv_scores(self) -> dict[str, float]:
        return {s: float(row["score"]) for s, row in self.csv_rows.items()}

    def autograded(self, student: str) -> NotebookNode:
        path = self.course / "autograded" / student / ASSIGNMENT / NOTEBOOK
        return nbformat.read(str(path), as_version=4)

    def step_scores(self, student: str) -> dict[str, float]:
        """Each step's score in nbgrader's gradebook."""
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gb:
            return {
                s.name: float(gb.find_grade(s.test_id, NOTEBOOK_ID, ASSIGNMENT, student).score)
                for s in STEPS
            }

    def checksum_warnings(self) -> dict[str, set[str]]:
        """student -> the cells for which autograde warned "Attribute 'checksum' ... changed"."""
        found: dict[str, set[str]] = {}
        student = ""
        for line in self.log.splitlines():
            sanitizing = re.search(r"Sanitizing .*/submitted/([^/]+)/", line)
            if sanitizing:
                student = sanitizing.group(1)
            changed = re.search(r"Attribute 'checksum' for cell (\S+) has changed", line)
            if changed:
                found.setdefault(student, set()).add(changed.group(1))
        return found


def read_feedback(course: Path) -> dict[str, str]:
    return {p.parent.parent.name: p.read_text() for p in (course / "feedback").glob("*/*/*.html")}


def read_export(course: Path) -> dict[str, dict[str, str]]:
    with open(course / "grades.csv", newline="") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def cli_steps(sub: dict[str, Any]) -> dict[str, float]:
    return {s["step"]: float(s["score"]) for s in sub["steps"]}


def grade_cell(nb: NotebookNode, gid: str) -> NotebookNode:
    return next(c for c in nb.cells if grade_id(c) == gid)


def stdout(cell: NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")

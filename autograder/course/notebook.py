"""The nbgrader source notebook of an exercise, assembled from the exercise value.

    setup       the lecture's setup cells (locked), the forward pass, the checks (locked)
    per step    explanation (markdown), answer cell (grade id = the gradient's name, the model
                answer between nbgrader's solution markers), grade cell ``test_<name>``
                (hidden test, then the visible check)

nbgrader derives the student and solution notebooks from it (:mod:`autograder.course.build`).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode

from ..exercises.definition import Exercise, Step
from ..grading.submission import METADATA_KEY
from . import templates

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
"""The kernel ipykernel installs by default."""


def language_info() -> dict[str, object]:
    """What a Python kernel reports about itself when a notebook opens. JupyterLab writes it
    into the notebook, so a notebook that already holds exactly this opens unmodified (with a
    kernel of the Python the course was built with)."""
    return {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": platform.python_version(),
    }


def markdown(cell_id: str, text: str) -> NotebookNode:
    return nbformat.v4.new_markdown_cell(text.rstrip("\n"), id=cell_id)


def code(cell_id: str, source: str, nbgrader: dict[str, Any] | None = None) -> NotebookNode:
    cell = nbformat.v4.new_code_cell(source.rstrip("\n"), id=cell_id)
    if nbgrader is not None:
        cell.metadata["nbgrader"] = {**nbgrader, "grade_id": cell_id, "schema_version": 3}
    return cell


def readonly(cell_id: str, source: str) -> NotebookNode:
    """A locked cell: nbgrader restores it from the source when grading, so edits do not count."""
    return code(cell_id, source, {"grade": False, "solution": False, "locked": True})


def points(step: Step) -> float | int:
    return int(step.points) if float(step.points).is_integer() else step.points


def step_cells(ex: Exercise, step: Step, index: int) -> list[NotebookNode]:
    """Explanation, answer cell (grade_id = the gradient's name), grade cell (``test_<name>``);
    a training step's answer cell comes after a locked cell giving it what it updates."""
    before = []
    if step.kind == "training":
        before = [readonly(f"before_{step.name}", templates.before_training(ex))]
    return [
        markdown(f"explain_{step.name}", templates.step_markdown(ex, step, index)),
        *before,
        code(
            step.name,
            templates.answer_source(step),
            {"grade": False, "solution": True, "locked": False},
        ),
        code(
            step.test_id,
            templates.check_source(ex, step),
            {"grade": True, "solution": False, "locked": True, "points": points(step)},
        ),
    ]


def source_notebook(ex: Exercise) -> NotebookNode:
    """The nbgrader source notebook of ``ex``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": language_info(),
        METADATA_KEY: {"exercise": ex.id},
    }
    nb.cells = [
        markdown("intro", templates.intro(ex)),
        markdown("setup", templates.SETUP_INTRO),
        readonly("setup_imports", templates.IMPORTS),
        readonly("setup_names", templates.LOAD_NAMES),
        readonly("setup_dataset", templates.DATASET),
        readonly("setup_params", templates.PARAMS),
        readonly("setup_batch", templates.BATCH),
        markdown("forward_intro", "## The forward pass\n\n" + ex.text.forward_intro),
        readonly("forward", templates.forward_source(ex)),
        markdown("checks_intro", templates.CHECKS_INTRO),
        readonly("setup_checks", templates.checks_source(ex)),
    ]
    given = templates.given_source(ex)
    if given:
        nb.cells.append(readonly("setup_given", given))
    nb.cells += [
        markdown(
            "steps_intro",
            "## The backward pass, one gradient at a time\n\n"
            + ex.text.steps_intro.format(n_steps=len(ex.steps)),
        ),
    ]
    for index, step in enumerate(ex.steps, start=1):
        nb.cells += step_cells(ex, step, index)
    if ex.text.outro:
        nb.cells.append(markdown("outro", ex.text.outro))
    outro = templates.outro_source(ex)
    if outro:
        nb.cells.append(readonly("train_and_sample", outro))
    nbformat.validate(nb)
    return nb


def write_notebook(nb: NotebookNode, path: Path) -> None:
    """Write ``nb`` in nbformat's canonical layout (sorted keys, one-space indent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))

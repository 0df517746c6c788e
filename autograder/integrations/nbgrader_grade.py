"""``nbgrader autograde`` with the kit's engine: the preprocessor that takes the place of Execute.

nbgrader's autograde first sanitizes a submission (clears outputs, restores every locked cell and
grade cell from the source), then runs ``Autograde.autograde_preprocessors`` on it; the last of
them, ``SaveAutoGrades``, scores each grade cell from its outputs (``nbgrader.utils
.determine_grade``): an ``error`` or ``stderr`` output scores 0, else the first ``execute_result``
holding a number is the partial credit, else the cell gets full points.

:class:`GradeWithKit` stands where nbgrader's ``Execute`` stands in that list. It starts no
kernel and runs no cell: it reads each step's answer cell by its grade_id (the step's name),
grades the answers with :class:`autograder.engine.grader.Grader` in the kit's sandboxes, and
writes each ``test_<name>`` grade cell's outputs:

1. a ``stream`` (stdout) with the verdict and the diagnoses, in the words of
   ``backprop-ninja grade`` (:func:`autograder.reports.text.verdict_text`);
2. an ``execute_result`` whose ``text/plain`` is the points, the partial credit nbgrader saves;
   its data also holds the step's full result as JSON (:data:`RESULT_MIME`), which the feedback
   step (:mod:`autograder.nbgrader_feedback`) draws into the student's page.

A failing step scores 0 through that number, never through an error or stderr output, and
nothing a student's code prints reaches the notebook, so warnings cannot cost a right answer.
Other cells keep no outputs. A deleted, renamed or duplicated answer cell costs its own step,
with the reason as the diagnosis. The exercise is the nbgrader assignment's (its id is the
exercise's), else the one the notebook says it is.

:class:`RestoreReleasedCells` stands where nbgrader's ``OverwriteCells`` stands in
``Autograde.sanitize_preprocessors``: it restores the locked cells as nbgrader does, without
nbgrader's false alarm on every untouched grade cell (nbgrader issue #1961, see the class).
"""

from __future__ import annotations

import html
import os
from dataclasses import asdict
from pathlib import Path

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbformat.v4 import new_code_cell
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import is_grade
from traitlets import Float, Integer, Unicode

from ..exercises import EXERCISES, Exercise, Step
from ..grading.results import StepResult, finite
from ..grading.submission import exercise_of, extract_answers
from ..reports.text import verdict_text
from ..sandbox.limits import Limits

RESULT_MIME = "application/vnd.backprop-ninja.step+json"
"""Mimetype of the step result stored beside the points in each grade cell's execute_result."""

SEED_ENV = "BACKPROP_NINJA_SEED"
"""Environment variable that fixes the seed when the ``seed`` trait is not set (as in
:mod:`autograder.incell`, so a stock-Execute course and this preprocessor can share a seed)."""


def cell_points(cell_max: float, result: StepResult) -> float:
    """The step's score on the grade cell's own scale (its nbgrader points may differ from the
    catalog's)."""
    if result.max_score <= 0:
        return 0.0
    return cell_max * result.score / result.max_score


def grade_outputs(
    result: StepResult, seed: int, cell_max: float, path: str, exercise: str
) -> list[NotebookNode]:
    """A grade cell's outputs: the verdict as stdout, then the points as the execute_result."""
    stream = {"output_type": "stream", "name": "stdout", "text": verdict_text(result, seed)}
    payload = finite({"seed": seed, "path": path, "exercise": exercise, "result": asdict(result)})
    score = cell_points(cell_max, result)
    label = f"<strong>{html.escape(result.step)}</strong>: {score:g} / {cell_max:g} points"
    points = {
        "output_type": "execute_result",
        "execution_count": None,
        "metadata": {},
        # nbgrader reads the number in text/plain; notebooks and feedback show the text/html
        "data": {"text/plain": f"{score:g}", "text/html": label, RESULT_MIME: payload},
    }
    return [from_dict(stream), from_dict(points)]


def unknown_grade_outputs(grade_id: str) -> list[NotebookNode]:
    """Outputs of a grade cell that is no step of the catalog: 0 points and why."""
    text = (
        f"{grade_id}: not graded: the backprop-ninja kit grades only the cells test_<step>; "
        "grade this cell by hand, or autograde with nbgrader's Execute preprocessor\n"
    )
    return [
        from_dict({"output_type": "stream", "name": "stdout", "text": text}),
        from_dict(
            {
                "output_type": "execute_result",
                "execution_count": None,
                "metadata": {},
                "data": {"text/plain": "0"},
            }
        ),
    ]


def submission_path(resources: ResourcesDict) -> Path:
    """``student/assignment/notebook.ipynb``, the name a submission's results carry."""
    info = resources.get("nbgrader", {})
    parts = [str(info[k]) for k in ("student", "assignment") if info.get(k)]
    return Path(*parts, f"{info.get('notebook') or 'submission'}.ipynb")


def restored_grade_cell(step: Step, cell_id: str) -> NotebookNode:
    """A locked grade cell for ``step``, standing in for one deleted from the submission (the
    step is graded from its answer cell all the same, as ``backprop-ninja grade`` grades it)."""
    source = (
        f"# {step.test_id}: this grade cell was missing from the submission and was put back "
        "by the grader;\n"
        f"# the step is graded from its answer cell, the cell with grade id '{step.name}'."
    )
    meta = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": step.test_id,
        "points": step.points,
        "schema_version": 3,
    }
    cell = new_code_cell(source, metadata={"deletable": False, "editable": False})
    cell.metadata["nbgrader"] = meta
    cell["id"] = cell_id
    return cell


def restore_grade_cells(nb: NotebookNode, ex: Exercise) -> list[str]:
    """Put back the grade cell of every step whose ``test_<name>`` cell is missing: after the
    step's answer cell, else after the cells of the steps before it, else at the end. Returns
    the grade ids put back."""
    order = {s.name: i for i, s in enumerate(ex.steps)}
    order.update({s.test_id: i for i, s in enumerate(ex.steps)})
    ids = {cell.get("id") for cell in nb.cells}
    restored = []
    for i, step in enumerate(ex.steps):
        gids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
        if step.test_id in gids:
            continue
        before = [k for k, g in enumerate(gids) if g == step.name or order.get(g, i) < i]
        at = before[-1] + 1 if before else len(nb.cells)
        cell_id = step.test_id if step.test_id not in ids else f"{step.test_id}-restored"
        cell = restored_grade_cell(step, cell_id)
        if (nb.nbformat, nb.nbformat_minor) < (4, 5):  # cell ids came with nbformat 4.5
            del cell["id"]
        nb.cells.insert(at, cell)
        restored.append(step.test_id)
    return restored


class GradeWithKit(NbGraderPreprocessor):
    """Grade the submission with the backprop-ninja engine and write each grade cell's outputs
    (verdict and diagnoses as stdout, points as the execute_result), instead of executing the
    notebook in a kernel."""

    seed = Integer(
        None,
        allow_none=True,
        help=(
            "Seed of the hidden configurations. Unset: $BACKPROP_NINJA_SEED if it is set, else "
            "a seed drawn once per autograde run; every verdict prints the seed, so a run can "
            "be replayed with `backprop-ninja grade --seed N`."
        ),
    ).tag(config=True)

    timeout = Float(
        10.0,
        help="Seconds of wall-clock time one step's answer may run in its sandboxed worker.",
    ).tag(config=True)

    jobs = Integer(
        0,
        help="Sandboxes grading at once (0: one per CPU core).",
    ).tag(config=True)

    sandbox = Unicode(
        "auto",
        help=(
            "How answers are confined: auto, userns, bwrap, or none (runs them unconfined, with "
            "the grader's rights: only for answers you trust)."
        ),
    ).tag(config=True)

    def _seed(self) -> int | None:
        if self.seed is not None:
            return int(self.seed)
        env = os.environ.get(SEED_ENV, "").strip()
        return int(env) if env else None

    def preprocess(
        self, nb: NotebookNode, resources: ResourcesDict
    ) -> tuple[NotebookNode, ResourcesDict]:
        from ..engine.grader import shared_grader  # torch: only once grading starts

        limits = Limits(step_seconds=float(self.timeout))
        grader = shared_grader(self._seed(), limits, int(self.jobs), str(self.sandbox))
        assignment = resources.get("nbgrader", {}).get("assignment")
        ex = EXERCISES.get(str(assignment)) or exercise_of(nb) or EXERCISES["backprop_ninja"]
        sub = grader.grade_submission(extract_answers(nb, submission_path(resources), ex))
        for grade_id in restore_grade_cells(nb, ex):
            self.log.warning("%s: grade cell %s was missing; put back", sub.path, grade_id)
        by_step = {r.step: r for r in sub.steps}
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            cell.execution_count = None
            if not is_grade(cell):
                cell.outputs = []
                continue
            grade_id = cell.metadata.nbgrader.get("grade_id", "")
            step = ex.by_test_id.get(grade_id)
            if step is None:
                self.log.warning("grade cell %s is not a step of the kit: scored 0", grade_id)
                cell.outputs = unknown_grade_outputs(grade_id)
                continue
            result = by_step[step.name]
            cell_max = float(cell.metadata.nbgrader.get("points", step.points))
            cell.outputs = grade_outputs(result, grader.seed, cell_max, sub.path, ex.id)
        self.log.info(
            "%s: %g/%g with the backprop-ninja engine (seed %d)",
            sub.path,
            sub.score,
            sub.max_score,
            grader.seed,
        )
        return nb, resources


class RestoreReleasedCells(OverwriteCells):
    """nbgrader's ``OverwriteCells`` that knows a released grade cell lacks its hidden tests.

    ``generate_assignment`` saves each locked cell in the gradebook with its source and the
    checksum of that source, hidden tests included (``ComputeChecksums`` and ``SaveCells`` run
    before ``ClearHiddenTests``: they must, since autograde puts the hidden tests back from the
    gradebook), then releases the cell without its hidden tests. ``OverwriteCells`` restores a
    locked cell whose checksum differs from the gradebook's, and warns "Attribute 'checksum' for
    cell test_... has changed!": for every grade cell of every submission, untouched or not
    (nbgrader issue #1961), which drowns the warnings that mean something.

    This preprocessor first recognises a locked cell that is exactly as released (the
    gradebook's source with its hidden test region removed, as ``ClearHiddenTests`` removes it,
    with the course's delimiters) and puts the hidden tests back without a word; any other
    change to a locked cell gets ``OverwriteCells``' own warning and restore.
    """

    def preprocess_cell(
        self, cell: NotebookNode, resources: ResourcesDict, cell_index: int
    ) -> tuple[NotebookNode, ResourcesDict]:
        self._restore_if_released(cell)
        return super().preprocess_cell(cell, resources, cell_index)

    def _restore_if_released(self, cell: NotebookNode) -> None:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None:
            return
        try:
            source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:
            return  # OverwriteCells reports it
        if not source.locked or source.cell_type != cell.cell_type:
            return
        released = from_dict({"cell_type": source.cell_type, "source": source.source})
        if ClearHiddenTests(parent=self)._remove_hidden_test_region(released):
            if cell.source == released.source:
                cell.source = source.source

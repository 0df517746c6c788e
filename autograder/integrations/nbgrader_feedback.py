"""``nbgrader generate_feedback`` for the kit: the student's page on top, no hidden test code.

nbgrader's feedback is the autograded notebook as HTML, and the autograded notebook holds the
source's grade cells, hidden tests included: nbgrader shows them by default. Two preprocessors
of ``GenerateFeedback.preprocessors`` (after ``GetGrades``) change that:

- :class:`HideTestCode` removes the hidden test region of every grade cell and cuts every error
  output of a grade cell to its last line (``AssertionError: <diagnosis>``): an IPython
  traceback quotes the lines around the failing one, hidden tests included. Student cells are
  left as they are (their text cannot break the feedback of the whole class).
- :class:`EmbedKitFeedback` reads the step results that :class:`autograder.nbgrader_grade
  .GradeWithKit` stored in the grade cells and puts the kit's per-student page
  (:func:`autograder.feedback.render_feedback`: the backward graph coloured by result, every
  failing step with its diagnoses, the rows of C for dC) at the top, in a sandboxed ``iframe`` so
  its styles and nbgrader's stay apart. Each grade cell keeps its verdict and diagnoses as text
  below its visible check.

A course that grades with nbgrader's stock ``Execute`` has no stored results: its feedback has no
page, but the grade cells still show ``check_step``'s verdict line and, for a failing step, the
diagnosis as the error's message.
"""

from __future__ import annotations

import html
from typing import Any

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, NbGraderPreprocessor
from nbgrader.utils import is_grade
from traitlets import Integer, List

from ..exercises import DEFAULT, EXERCISES
from ..grading.results import SubmissionResult, submission_from_json
from .nbgrader_grade import RESULT_MIME

PAGE_CELL_ID = "backprop-ninja-feedback"
"""Id of the cell that carries the page (the first cell of the feedback notebook)."""

_RESIZE = "this.style.height=(this.contentDocument.documentElement.scrollHeight+24)+'px'"
"""Grows the iframe to its page's height once loaded (the page itself runs no script)."""


def _display_priority() -> List[str]:
    """The ``display_data_priority`` trait of nbgrader's GetGrades: configurable, so the HTML
    exporter's setting of it (on NbConvertBase) applies quietly instead of warning."""
    return List(
        GetGrades.display_data_priority.default_value,
        help="Output mimetypes in order of preference (set by the HTML exporter).",
    ).tag(config=True)


class HideTestCode(ClearHiddenTests):
    """Remove the hidden tests from grade cells, and every traceback from their error outputs."""

    display_data_priority = _display_priority()

    def preprocess_cell(
        self, cell: NotebookNode, resources: ResourcesDict, cell_index: int
    ) -> tuple[NotebookNode, ResourcesDict]:
        if not is_grade(cell):
            return cell, resources
        self._remove_hidden_test_region(cell)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [
                    f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
                ]
        return cell, resources


def stored_results(nb: NotebookNode) -> tuple[SubmissionResult, int] | None:
    """The submission's result and seed as GradeWithKit stored them in the grade cells, or None
    when the notebook was graded another way. A grade cell's score from the gradebook (set by
    ``GetGrades``; a grader may have changed it in formgrader) replaces the kit's score."""
    steps: list[dict[str, Any]] = []
    seed, path, exercise = None, "", DEFAULT.id
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_grade(cell):
            continue
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get(RESULT_MIME)
            if output.get("output_type") != "execute_result" or not isinstance(payload, dict):
                continue
            step = dict(payload["result"])
            score = cell.metadata.nbgrader.get("score")
            points = cell.metadata.nbgrader.get("points")
            if score is not None and points:
                step["score"] = float(score) * float(step["max_score"]) / float(points)
            steps.append(step)
            seed, path = payload.get("seed"), str(payload.get("path", ""))
            exercise = str(payload.get("exercise", DEFAULT.id))
            del output["data"][RESULT_MIME]  # read once; the HTML needs only the text
    if not steps:
        return None
    ex = EXERCISES.get(exercise, DEFAULT)
    order = {s.name: i for i, s in enumerate(ex.steps)}
    steps.sort(key=lambda s: order.get(s["step"], len(order)))
    missing = [s.name for s in ex.steps if s.name not in {d["step"] for d in steps}]
    error = f"no grade cell for: {', '.join(missing)}" if missing else None
    sub = submission_from_json(
        {
            "path": path,
            "score": sum(float(s["score"]) for s in steps),
            "max_score": ex.total_points,
            "error": error,
            "steps": steps,
            "exercise": ex.id,
        }
    )
    return sub, int(seed) if seed is not None else 0


def page_cell(page: str, height: int) -> NotebookNode:
    """A code cell without source whose one output is ``page`` in a sandboxed iframe."""
    frame = (
        f'<iframe title="backprop-ninja feedback" sandbox="allow-same-origin" '
        f'style="width:100%;height:{height}px;border:0" onload="{_RESIZE}" '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )
    return from_dict(
        {
            "cell_type": "code",
            "id": PAGE_CELL_ID,
            "execution_count": None,
            "metadata": {"transient": {"remove_source": True}},
            "source": "",
            "outputs": [
                {"output_type": "display_data", "metadata": {}, "data": {"text/html": frame}}
            ],
        }
    )


class EmbedKitFeedback(NbGraderPreprocessor):
    """Put the kit's per-student feedback page (from the step results GradeWithKit stored) at the
    top of the feedback."""

    display_data_priority = _display_priority()

    height = Integer(
        1100,
        help="Height in pixels of the feedback page's frame before it grows to fit its page.",
    ).tag(config=True)

    def preprocess(
        self, nb: NotebookNode, resources: ResourcesDict
    ) -> tuple[NotebookNode, ResourcesDict]:
        found = stored_results(nb)
        if found is None:
            self.log.info("no backprop-ninja results in this notebook: no feedback page")
            return nb, resources
        from ..reports.feedback import render_feedback  # matplotlib: only for a page to draw

        sub, seed = found
        cell = page_cell(render_feedback(sub, seed), int(self.height))
        if (nb.nbformat, nb.nbformat_minor) < (4, 5):  # cell ids came with nbformat 4.5
            del cell["id"]
        nb.cells.insert(0, cell)
        return nb, resources

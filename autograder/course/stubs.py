"""nbgrader's ``ClearSolutions`` with a stub that names its step.

A released answer cell reads ``raise NotImplementedError("dlogprobs: replace this line with your
code")`` instead of a bare ``raise NotImplementedError()``, so the error a student meets says
which step to answer. The course's ``nbgrader_config.py`` puts :class:`StepStubs` where
``ClearSolutions`` stands in ``GenerateAssignment.preprocessors``.
"""

from __future__ import annotations

from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearSolutions
from traitlets import Unicode

STUB = 'raise NotImplementedError("{name}: replace this line with your code")'


class StepStubs(ClearSolutions):
    """ClearSolutions whose code stub is :attr:`step_stub` with the cell's grade id filled in."""

    step_stub = Unicode(
        "# YOUR CODE HERE\n" + STUB,
        help="Code put in place of a solution; {name} is the answer cell's grade id.",
    ).tag(config=True)

    def preprocess_cell(
        self, cell: NotebookNode, resources: Any, cell_index: int
    ) -> tuple[NotebookNode, Any]:
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "this step")
        language = resources.get("language", "python")
        stubs: dict[str, str] = dict(self.code_stub)  # type: ignore[has-type]
        stubs[language] = self.step_stub.format(name=name)
        self.code_stub = stubs
        return super().preprocess_cell(cell, resources, cell_index)

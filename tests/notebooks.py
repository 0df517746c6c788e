"""Building submission notebooks for tests: the nbgrader cell layout, any answers."""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.catalog import STEPS
from autograder.solutions import SOLUTIONS

SCATTER_BUG_CODE = "dC = torch.zeros_like(C)\ndC[Xb] += demb"
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def make_notebook(
    path: Path,
    answers: dict[str, str] | None = None,
    default: str = "solution",
    extra_cells: list[str] | None = None,
) -> Path:
    """Write a notebook with one answer cell (grade_id = step name) and one grade cell per step.

    ``answers`` overrides single steps; other steps get the model solution (``default="solution"``)
    or the released stub (``default="stub"``).
    """
    answers = answers or {}
    cells = [nbformat.v4.new_code_cell(c) for c in (extra_cells or [])]
    for s in STEPS:
        code = answers.get(s.name, SOLUTIONS[s.name] if default == "solution" else STUB)
        cell = nbformat.v4.new_code_cell(code)
        cell.metadata["nbgrader"] = {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": s.name,
            "schema_version": 3,
        }
        test = nbformat.v4.new_code_cell(f"cmp('{s.name}', {s.name}, {s.var})")
        test.metadata["nbgrader"] = {
            "grade": True,
            "solution": False,
            "locked": True,
            "grade_id": s.test_id,
            "points": s.points,
            "schema_version": 3,
        }
        cells += [cell, test]
    nb = nbformat.v4.new_notebook(cells=cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path

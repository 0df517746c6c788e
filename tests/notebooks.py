"""Building submission notebooks for tests: the nbgrader cell layout of an exercise, any answers."""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.exercises import DEFAULT, Exercise
from autograder.grading.submission import METADATA_KEY

SCATTER_BUG_CODE = "dC = torch.zeros_like(C)\ndC[Xb] += demb"


def hang(tag: str, spin: bool) -> str:
    """An answer that never ends, distinct by ``tag``: a busy loop (plain code), or a sleep (it
    imports). Tests of a wall-clock budget let the first of their answers spin and the others
    sleep: the same budget, without burning a core the rest of the suite shares."""
    body = "while True:\n    pass" if spin else "import time\ntime.sleep(1e9)"
    return f"tag = {tag!r}\n{body}"


def stub(name: str) -> str:
    """An answer cell as released."""
    return (
        f'# YOUR CODE HERE\nraise NotImplementedError("{name}: replace this line with your code")'
    )


def make_notebook(
    path: Path,
    answers: dict[str, str] | None = None,
    default: str = "solution",
    extra_cells: list[str] | None = None,
    exercise: Exercise = DEFAULT,
) -> Path:
    """Write a notebook with one answer cell (grade_id = step name) and one grade cell per step.

    ``answers`` overrides single steps; other steps get the model answer (``default="solution"``)
    or the released stub (``default="stub"``).
    """
    answers = answers or {}
    cells = [nbformat.v4.new_code_cell(c) for c in (extra_cells or [])]
    for s in exercise.steps:
        code = answers.get(s.name, s.answer if default == "solution" else stub(s.name))
        cell = nbformat.v4.new_code_cell(code)
        cell.metadata["nbgrader"] = {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": s.name,
            "schema_version": 3,
        }
        test = nbformat.v4.new_code_cell(f"CHECKS.check('{s.name}')")
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
    nb.metadata[METADATA_KEY] = {"exercise": exercise.id}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path

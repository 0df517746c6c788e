"""The nbgrader preprocessors of the kit, called as nbgrader calls them, on released notebooks.

GradeWithKit (autograde) and HideTestCode / EmbedKitFeedback (generate_feedback) get a notebook
and nbgrader's resources; nbgrader's own ``determine_grade`` then reads the scores, exactly as its
SaveAutoGrades does. The real nbgrader commands run in ``test_nbgrader_e2e.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import nbformat
import pytest
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.utils import determine_grade, is_grade
from traitlets.config.loader import PyFileConfigLoader

from autograder.catalog import STEPS
from autograder.nbgrader_feedback import PAGE_CELL_ID, EmbedKitFeedback, HideTestCode
from autograder.nbgrader_grade import RESULT_MIME, SEED_ENV, GradeWithKit

from .nbgrader_course import (
    ALLCLOSE_PATCH,
    REPO_ROOT,
    SCATTER_BUG,
    filled,
    grade_id,
    released,
    with_extra_cell,
    without_cells,
)

SEED = 4242
RESOURCES = ResourcesDict(
    nbgrader={"student": "ada", "assignment": "backprop_ninja", "notebook": "nb"}
)


def autograde(nb: NotebookNode, **traits: Any) -> NotebookNode:
    """Run GradeWithKit on a copy of ``nb`` as nbgrader's autograde does."""
    pre = GradeWithKit(seed=SEED, **traits)
    out, _ = pre.preprocess(copy.deepcopy(nb), copy.deepcopy(RESOURCES))
    nbformat.validate(out)
    return out


def grade_cells(nb: NotebookNode) -> dict[str, NotebookNode]:
    return {str(grade_id(c)): c for c in nb.cells if is_grade(c)}


def scores(nb: NotebookNode) -> dict[str, float | None]:
    """Each grade cell's score as nbgrader's SaveAutoGrades computes it."""
    return {gid: determine_grade(cell)[0] for gid, cell in grade_cells(nb).items()}


def text(cell: NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.fixture(scope="module")
def right() -> NotebookNode:
    return autograde(filled())


# --- autograde -----------------------------------------------------------------------------


def test_every_grade_cell_gets_the_verdict_as_stdout_and_the_points_as_partial_credit(
    right: NotebookNode,
) -> None:
    cells = grade_cells(right)
    assert set(cells) == {s.test_id for s in STEPS}
    for step in STEPS:
        cell = cells[step.test_id]
        stream, result = cell.outputs
        assert (stream.output_type, stream.name) == ("stream", "stdout")
        assert stream.text.startswith(f"{step.name}: passed (1/1, hidden cases, seed {SEED})")
        assert result.output_type == "execute_result"
        assert result.data["text/plain"] == "1"
        assert result.data[RESULT_MIME]["result"]["step"] == step.name
    assert scores(right) == {s.test_id: 1.0 for s in STEPS}


def test_no_cell_is_executed_and_other_cells_keep_no_outputs(right: NotebookNode) -> None:
    for cell in right.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is None
            if not is_grade(cell):
                assert cell.outputs == []


def test_a_failing_step_scores_zero_through_the_number_not_an_error_output() -> None:
    nb = autograde(filled(SCATTER_BUG))
    cell = grade_cells(nb)["test_dC"]
    assert [o.output_type for o in cell.outputs] == ["stream", "execute_result"]
    assert cell.outputs[0].name == "stdout"
    assert "dC: failed (0/1" in text(cell)
    assert "[scatter-drops-duplicates]" in text(cell)
    assert cell.outputs[1].data["text/plain"] == "0"
    got = scores(nb)
    assert got.pop("test_dC") == 0
    assert set(got.values()) == {1.0}


def test_the_untouched_notebook_scores_zero_on_every_step() -> None:
    nb = autograde(released())
    assert set(scores(nb).values()) == {0}
    assert "[not-implemented]" in text(grade_cells(nb)["test_dlogprobs"])


def test_warnings_and_stderr_of_an_answer_never_cost_a_right_answer() -> None:
    noisy = (
        "import sys, warnings\n"
        "warnings.warn('a warning from the answer')\n"
        "print('to stderr', file=sys.stderr)\n"
        "print('to stdout')\n"
    )
    from autograder.solutions import SOLUTIONS

    nb = autograde(filled({"dlogprobs": noisy + SOLUTIONS["dlogprobs"]}))
    cell = grade_cells(nb)["test_dlogprobs"]
    assert determine_grade(cell)[0] == 1.0
    assert all(o.get("name") != "stderr" for o in cell.outputs)
    assert "a warning from the answer" not in text(cell)


def test_an_extra_cell_never_runs_so_monkeypatching_allclose_gains_nothing() -> None:
    nb = autograde(with_extra_cell(filled(SCATTER_BUG), ALLCLOSE_PATCH))
    assert sum(s or 0 for s in scores(nb).values()) == 25
    assert scores(nb)["test_dC"] == 0


def test_a_deleted_answer_cell_costs_its_step_and_says_why() -> None:
    nb = autograde(without_cells(filled(), {"dC"}))
    cell = grade_cells(nb)["test_dC"]
    assert determine_grade(cell)[0] == 0
    assert "[missing-cell]" in text(cell)
    assert "grade id 'dC'" in text(cell)


def test_a_deleted_grade_cell_is_put_back_after_its_answer_and_graded() -> None:
    nb = autograde(without_cells(filled(SCATTER_BUG), {"test_db1", "test_dC", "dC"}))
    ids = [grade_id(c) for c in nb.cells]
    assert ids.index("test_db1") == ids.index("db1") + 1
    assert ids.index("test_dC") == ids.index("test_demb") + 1  # its answer cell is gone too
    got = scores(nb)
    assert (got["test_db1"], got["test_dC"]) == (1.0, 0)
    assert "BEGIN HIDDEN TESTS" not in grade_cells(nb)["test_db1"].source


def test_a_grade_cell_that_is_no_step_scores_zero_and_says_why() -> None:
    nb = filled()
    extra = nbformat.v4.new_code_cell("assert True")
    extra.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": "test_extra",
        "points": 2,
        "schema_version": 3,
    }
    nb.cells.append(extra)
    cell = grade_cells(autograde(nb))["test_extra"]
    assert determine_grade(cell)[0] == 0
    assert "not graded" in text(cell)


def test_points_follow_the_grade_cell_when_the_course_changes_them() -> None:
    nb = filled()
    for cell in nb.cells:
        if grade_id(cell) == "test_dC":
            cell.metadata.nbgrader["points"] = 3
    assert scores(autograde(nb))["test_dC"] == 3.0


def test_the_seed_is_the_trait_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SEED_ENV, "77")
    assert GradeWithKit(seed=5)._seed() == 5
    assert GradeWithKit()._seed() == 77
    monkeypatch.delenv(SEED_ENV)
    assert GradeWithKit()._seed() is None


def test_the_course_config_puts_grade_with_kit_where_nbgraders_execute_was() -> None:
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    stock = Autograde.class_traits()["autograde_preprocessors"].default()
    assert config.Autograde.autograde_preprocessors == [
        GradeWithKit if p is Execute else p for p in stock
    ]
    feedback = config.GenerateFeedback.preprocessors
    assert HideTestCode in feedback and EmbedKitFeedback in feedback


# --- feedback ------------------------------------------------------------------------------


def error_output(evalue: str) -> NotebookNode:
    return from_dict(
        {
            "output_type": "error",
            "ename": "AssertionError",
            "evalue": evalue,
            "traceback": ['check_step("dC", In[-2])', "### BEGIN HIDDEN TESTS", "more"],
        }
    )


def test_hide_test_code_removes_hidden_tests_and_tracebacks_of_grade_cells() -> None:
    nb = copy.deepcopy(
        nbformat.read(str(REPO_ROOT / "source" / "backprop_ninja" / "backprop_ninja.ipynb"), 4)
    )
    student = nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nprint('no end marker')")
    nb.cells.append(student)
    grade = grade_cells(nb)["test_dC"]
    grade.outputs = [error_output("[scatter-drops-duplicates] ...")]
    HideTestCode().preprocess(nb, ResourcesDict())
    for cell in grade_cells(nb).values():
        assert "HIDDEN TESTS" not in cell.source and "check_step" not in cell.source
    assert grade.source.startswith("cmp('dC', dC, C)")
    assert grade.outputs[0].traceback == ["AssertionError: [scatter-drops-duplicates] ..."]
    assert student.source.startswith("### BEGIN HIDDEN TESTS")  # a student's text is theirs


def test_the_feedback_page_is_drawn_from_the_stored_results_on_top() -> None:
    nb = autograde(filled(SCATTER_BUG))
    for cell in grade_cells(nb).values():  # as GetGrades leaves them; a grader raised dC to 0.5
        cell.metadata.nbgrader["score"] = 0.5 if grade_id(cell) == "test_dC" else 1.0
    EmbedKitFeedback().preprocess(nb, copy.deepcopy(RESOURCES))
    nbformat.validate(nb)
    page = nb.cells[0]
    assert page.id == PAGE_CELL_ID
    assert page.metadata.transient.remove_source
    frame = page.outputs[0].data["text/html"]
    assert frame.startswith("<iframe") and 'sandbox="allow-same-origin"' in frame
    assert "Backprop ninja: your feedback" in frame
    assert "scatter-drops-duplicates" in frame
    assert "25.5 / 26" in frame
    assert all(RESULT_MIME not in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def test_no_page_when_the_notebook_was_graded_by_stock_execute() -> None:
    nb = filled()
    before = len(nb.cells)
    EmbedKitFeedback().preprocess(nb, copy.deepcopy(RESOURCES))
    assert len(nb.cells) == before

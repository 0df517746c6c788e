"""The nbgrader preprocessors of the kit, called as nbgrader calls them, on released notebooks.

GradeWithKit (autograde) and HideTestCode / NameSteps / SanitizeOutputs / EmbedKitFeedback
(generate_feedback) get a notebook and nbgrader's resources; nbgrader's own ``determine_grade``
then reads the scores, exactly as its SaveAutoGrades does. RestoreReleasedCells gets a stand-in
gradebook, and FeedbackExporter renders with nbgrader's own feedback template. The real
nbgrader commands run in ``test_nbgrader_e2e.py``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import nbformat
import pytest
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.utils import compute_checksum, determine_grade, is_grade
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.engine import grader as engine
from autograder.engine.grader import Grader
from autograder.integrations.nbgrader_feedback import (
    FEEDBACK_TEMPLATE_NAME,
    PAGE_CELL_ID,
    TITLE_KEY,
    EmbedKitFeedback,
    FeedbackExporter,
    HideTestCode,
    NameSteps,
    SanitizeOutputs,
    clean_html,
)
from autograder.integrations.nbgrader_grade import (
    RESULT_MIME,
    SEED_ENV,
    GradeWithKit,
    RestoreReleasedCells,
)

from .conftest import SEED
from .nbgrader_course import (
    ALLCLOSE_PATCH,
    ASSIGNMENT,
    EXERCISE,
    HOSTILE_MARKDOWN,
    PATHS,
    REPO_ROOT,
    SCATTER_BUG,
    filled,
    grade_id,
    released,
    with_extra_cell,
    without_cells,
)

STEPS = EXERCISE.steps
RESOURCES = ResourcesDict(
    nbgrader={"student": "ada", "assignment": ASSIGNMENT, "notebook": PATHS["release"].stem}
)


@pytest.fixture(scope="module", autouse=True)
def session_grader(grader: Grader) -> Iterator[list[tuple[Any, ...]]]:
    """GradeWithKit grades with the session's grader (seed ``SEED``): ``shared_grader`` is
    replaced for this module, and records what GradeWithKit asked it for."""
    calls: list[tuple[Any, ...]] = []

    def shared(seed: int | None, limits: Any, jobs: int = 0, sandbox: str = "auto") -> Grader:
        calls.append((seed, limits, jobs, sandbox))
        return grader

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "shared_grader", shared)
        yield calls


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


@pytest.fixture(scope="module")
def scatter_bug() -> NotebookNode:
    return autograde(filled(SCATTER_BUG))


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
        assert result.data[RESULT_MIME]["exercise"] == EXERCISE.id
    assert scores(right) == {s.test_id: 1.0 for s in STEPS}


def test_grade_with_kit_asks_for_a_grader_with_its_traits(
    session_grader: list[tuple[Any, ...]],
) -> None:
    session_grader.clear()
    autograde(released(), timeout=3.0, jobs=1, sandbox="none")
    ((seed, limits, jobs, sandbox),) = session_grader
    assert (seed, limits.step_seconds, jobs, sandbox) == (SEED, 3.0, 1, "none")


def test_no_cell_is_executed_and_other_cells_keep_no_outputs(right: NotebookNode) -> None:
    for cell in right.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is None
            if not is_grade(cell):
                assert cell.outputs == []


def test_a_failing_step_scores_zero_through_the_number_not_an_error_output(
    scatter_bug: NotebookNode,
) -> None:
    cell = grade_cells(scatter_bug)["test_dC"]
    assert [o.output_type for o in cell.outputs] == ["stream", "execute_result"]
    assert cell.outputs[0].name == "stdout"
    assert "dC: failed (0/1" in text(cell)
    assert "[scatter-drops-duplicates]" in text(cell)
    assert cell.outputs[1].data["text/plain"] == "0"
    got = scores(scatter_bug)
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
    nb = autograde(filled({"dlogprobs": noisy + EXERCISE.step("dlogprobs").answer}))
    cell = grade_cells(nb)["test_dlogprobs"]
    assert determine_grade(cell)[0] == 1.0
    assert all(o.get("name") != "stderr" for o in cell.outputs)
    assert "a warning from the answer" not in text(cell)


def test_an_extra_cell_never_runs_so_monkeypatching_allclose_gains_nothing() -> None:
    nb = autograde(with_extra_cell(filled(SCATTER_BUG), ALLCLOSE_PATCH))
    assert sum(s or 0 for s in scores(nb).values()) == len(STEPS) - 1
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


# --- restoring locked cells without false alarms -------------------------------------------


@dataclass
class SourceCell:
    """A gradebook's source cell, as nbgrader's Gradebook returns it."""

    name: str
    cell_type: str
    locked: bool
    source: str
    checksum: str


@dataclass
class GradeCell:
    max_score: float


class StandInGradebook:
    """The two lookups OverwriteCells makes, answered from the source notebook, as
    ``generate_assignment`` saved it (checksums taken with the hidden tests in)."""

    def __init__(self, source: NotebookNode) -> None:
        self.cells: dict[str, NotebookNode] = {}
        for cell in source.cells:
            gid = grade_id(cell)
            if gid is not None:
                cell.metadata.nbgrader["checksum"] = compute_checksum(cell)
                self.cells[gid] = cell

    def find_source_cell(self, name: str, notebook: str, assignment: str) -> SourceCell:
        cell = self.cells[name]
        meta = cell.metadata.nbgrader
        locked = bool(meta.get("locked") or meta.get("grade")) and not meta.get("solution")
        return SourceCell(name, cell.cell_type, locked, cell.source, meta["checksum"])

    def find_graded_cell(self, name: str, notebook: str, assignment: str) -> GradeCell:
        return GradeCell(float(self.cells[name].metadata.nbgrader["points"]))


def source_notebook() -> NotebookNode:
    return nbformat.read(str(REPO_ROOT / PATHS["source"]), as_version=4)


def restore(nb: NotebookNode, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Run RestoreReleasedCells cell by cell on ``nb`` (as OverwriteCells.preprocess does once
    connected to the gradebook); the warnings it logged."""
    pre = RestoreReleasedCells()
    pre.log = logging.getLogger("restore-released-cells")
    pre.gradebook = StandInGradebook(source_notebook())
    pre.notebook_id, pre.assignment_id = PATHS["source"].stem, ASSIGNMENT
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="restore-released-cells"):
        for i, cell in enumerate(nb.cells):
            pre.preprocess_cell(cell, ResourcesDict(), i)
    return [r.getMessage() for r in caplog.records]


def test_an_untouched_notebook_gets_its_hidden_tests_back_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nb = filled()
    assert restore(nb, caplog) == []
    source = {grade_id(c): c.source for c in source_notebook().cells if is_grade(c)}
    for gid, cell in grade_cells(nb).items():
        assert cell.source == source[gid]
        assert cell.source.startswith("### BEGIN HIDDEN TESTS\nfrom autograder.incell import")


def test_a_changed_locked_cell_still_gets_nbgraders_warning_and_restore(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nb = filled()
    cells = grade_cells(nb)
    cells["test_dC"].source = "print('all good')"
    setup = next(c for c in nb.cells if grade_id(c) == "setup_params")
    setup.source += "\nW1 = W1 * 0"
    warnings = restore(nb, caplog)
    assert len(warnings) == 2
    assert all("Attribute 'checksum'" in w and "has changed" in w for w in warnings)
    assert {w.split(" for cell ")[1].split()[0] for w in warnings} == {"test_dC", "setup_params"}
    assert cells["test_dC"].source.startswith("### BEGIN HIDDEN TESTS")
    assert "W1 * 0" not in setup.source


def test_answer_cells_are_the_students_and_left_as_they_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nb = filled(SCATTER_BUG)
    assert restore(nb, caplog) == []
    answer = next(c for c in nb.cells if grade_id(c) == "dC")
    assert answer.source == SCATTER_BUG["dC"]


# --- the course's configuration ------------------------------------------------------------


@pytest.fixture(scope="module")
def course_config() -> Config:
    return PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()


def test_the_course_config_puts_the_kits_preprocessors_where_nbgraders_were(
    course_config: Config,
) -> None:
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute, OverwriteCells

    stock = Autograde.class_traits()["autograde_preprocessors"].default()
    assert course_config.Autograde.autograde_preprocessors == [
        GradeWithKit if p is Execute else p for p in stock
    ]
    sanitize = Autograde.class_traits()["sanitize_preprocessors"].default()
    assert course_config.Autograde.sanitize_preprocessors == [
        RestoreReleasedCells if p is OverwriteCells else p for p in sanitize
    ]


def test_the_course_config_writes_feedback_with_the_kits_exporter_and_preprocessors(
    course_config: Config,
) -> None:
    assert course_config.GenerateFeedback.exporter_class is FeedbackExporter
    feedback = list(course_config.GenerateFeedback.preprocessors)
    for pre in (HideTestCode, NameSteps, SanitizeOutputs, EmbedKitFeedback):
        assert pre in feedback
    # everything the submission brought is sanitized; the kit's page comes after
    assert feedback.index(SanitizeOutputs) < feedback.index(EmbedKitFeedback)


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
    nb = source_notebook()
    student = nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nprint('no end marker')")
    nb.cells.append(student)
    grade = grade_cells(nb)["test_dC"]
    grade.outputs = [error_output("[scatter-drops-duplicates] ...")]
    HideTestCode().preprocess(nb, ResourcesDict())
    for cell in grade_cells(nb).values():
        assert "HIDDEN TESTS" not in cell.source and "check_step" not in cell.source
    assert grade.source == "CHECKS.check('dC')"
    assert grade.outputs[0].traceback == ["AssertionError: [scatter-drops-duplicates] ..."]
    assert student.source.startswith("### BEGIN HIDDEN TESTS")  # a student's text is theirs


def test_name_steps_titles_each_grade_cell_with_its_step() -> None:
    nb = filled()
    stray = next(c for c in nb.cells if grade_id(c) == "dh")
    stray.metadata[TITLE_KEY] = {"title": "<b>forged</b>"}  # a student's metadata is not kept
    NameSteps().preprocess(nb, copy.deepcopy(RESOURCES))
    titles = {gid: c.metadata[TITLE_KEY]["title"] for gid, c in grade_cells(nb).items()}
    assert titles == {
        s.test_id: f"Step {i} of {len(STEPS)}: {s.name}" for i, s in enumerate(STEPS, start=1)
    }
    assert TITLE_KEY not in stray.metadata


def test_the_feedback_page_is_drawn_from_the_stored_results_on_top(
    scatter_bug: NotebookNode,
) -> None:
    nb = copy.deepcopy(scatter_bug)
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


# --- feedback that runs no student script --------------------------------------------------


class Tags(HTMLParser):
    """Every start tag of a page with its attributes, and the text of its scripts."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)

    def handlers(self) -> list[tuple[str, str]]:
        """(tag, attribute) of every event handler attribute (``on...``)."""
        return [(t, a) for t, attrs in self.tags for a in attrs if a.lower().startswith("on")]


def test_clean_html_keeps_markup_and_drops_what_runs() -> None:
    page = clean_html(
        "<h3 id='s'>Step</h3><p>a <code>x</code> <em>b</em></p><img src=x onerror=alert(1)>"
        "<script>alert(2)</script><a href='javascript:alert(3)'>j</a>"
        "<img src='data:image/png;base64,AAAA'><a href='data:text/html,<script>'>d</a>"
        "<div style='position:fixed'>s</div><iframe src=x></iframe>"
    )
    tags = Tags(page)
    assert [t for t, _ in tags.tags][:5] == ["h3", "p", "code", "em", "img"]
    assert tags.handlers() == [] and tags.scripts == []
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page  # shown as text, not run
    hrefs = [a.get("href") for t, a in tags.tags if t == "a"]
    assert hrefs == [None, None]  # no javascript: or data: link
    assert 'src="data:image/png;base64,AAAA"' in page
    assert "style" not in page and "&lt;iframe" in page


def test_sanitize_outputs_cleans_what_a_kernel_wrote_and_keeps_the_kits_result(
    scatter_bug: NotebookNode,
) -> None:
    nb = copy.deepcopy(scatter_bug)
    student = nbformat.v4.new_code_cell("display(...)")
    student.outputs = [
        from_dict(
            {
                "output_type": "display_data",
                "metadata": {"image/png": {"width": "1 onerror=alert(1)"}},
                "data": {
                    "text/html": "<b>hi</b><img src=x onerror=alert(2)>",
                    "application/javascript": "alert(3)",
                    "image/png": "iVBORw0KGgo=",
                    "image/jpeg": 'x" onerror="alert(4)',
                    "text/plain": "<hi>",
                },
            }
        )
    ]
    nb.cells.append(student)
    SanitizeOutputs().preprocess(nb, copy.deepcopy(RESOURCES))
    out = student.outputs[0]
    assert out.metadata == {}
    assert set(out.data) == {"text/html", "image/png", "text/plain"}
    assert out.data["text/html"] == '<b>hi</b><img src="x">'
    dc = grade_cells(nb)["test_dC"].outputs[1]
    assert RESULT_MIME in dc.data and dc.data["text/html"].startswith("<strong>dC</strong>")


def render_feedback_html(nb: NotebookNode) -> str:
    """``nb`` as ``nbgrader generate_feedback`` renders it with the course's exporter: the
    feedback preprocessors, then nbgrader's feedback template (as nbgrader configures it)."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    # nbgrader's settings of the exporter: its feedback template and its stylesheet's folder
    config = GenerateFeedback(coursedir=CourseDirectory()).config
    resources = copy.deepcopy(RESOURCES)
    resources["nbgrader"].update(score=25.0, max_score=26.0, late_penalty=0)
    for cell in grade_cells(nb).values():  # as GetGrades leaves them
        cell.metadata.nbgrader["score"] = float(determine_grade(cell)[0] or 0)
    for pre in (HideTestCode(), NameSteps(), SanitizeOutputs(), EmbedKitFeedback()):
        nb, resources = pre.preprocess(nb, resources)
    exporter = FeedbackExporter(config=config)
    assert exporter.template_file == FEEDBACK_TEMPLATE_NAME
    html, _ = exporter.from_notebook_node(nb, resources=resources)
    return html


def test_the_feedback_html_names_steps_and_runs_no_student_script(
    scatter_bug: NotebookNode,
) -> None:
    nb = with_extra_cell(copy.deepcopy(scatter_bug), HOSTILE_MARKDOWN, markdown=True)
    page = render_feedback_html(nb)
    for i, step in enumerate(STEPS, start=1):
        score = "0.0" if step.name == "dC" else "1.0"
        entry = f'<a href="#{step.test_id}">Step {i} of {len(STEPS)}: {step.name}</a>'
        assert f"{entry} (Score: {score} / 1.0)" in page, step.name
    assert "Test cell" not in page
    tags = Tags(page)
    # the only event handler is the one that sizes the kit's page; no script says alert
    assert tags.handlers() == [("iframe", "onload")]
    assert not any("alert" in s for s in tags.scripts)
    assert "My notes" in page and "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert not any((a.get("href") or "").startswith("javascript") for _, a in tags.tags)
    assert "Backprop ninja: your feedback" in page  # the kit's page, in its frame
    assert "BEGIN HIDDEN TESTS" not in page and "check_step(" not in page

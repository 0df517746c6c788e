"""``nbgrader generate_feedback`` for the kit: the student's page on top, no hidden test code.

nbgrader's feedback is the autograded notebook as HTML, and the autograded notebook holds the
source's grade cells, hidden tests included: nbgrader shows them by default. Two preprocessors
of ``GenerateFeedback.preprocessors`` (after ``GetGrades``) change that:

- :class:`HideTestCode` removes the hidden test region of every grade cell and cuts every error
  output of a grade cell to its last line (``AssertionError: <diagnosis>``): an IPython
  traceback quotes the lines around the failing one, hidden tests included. Student cells are
  left as they are (their text cannot break the feedback of the whole class).
- :class:`EmbedKitFeedback` reads the step results that :class:`autograder.integrations
  .nbgrader_grade.GradeWithKit` stored in the grade cells and puts the kit's per-student page
  (:func:`autograder.reports.feedback.render_feedback`: the backward graph coloured by result, every
  failing step with its diagnoses, the rows of C for dC) at the top, in a sandboxed ``iframe`` so
  its styles and nbgrader's stay apart. Each grade cell keeps its verdict and diagnoses as text
  below its visible check.

A course that grades with nbgrader's stock ``Execute`` has no stored results: its feedback has no
page, but the grade cells still show ``check_step``'s verdict line and, for a failing step, the
diagnosis as the error's message.

Three more pieces make the page readable, and safe whoever wrote the notebook:

- :class:`NameSteps` gives each grade cell the title of its step ("Step 5 of 26: dcounts"),
  which :class:`FeedbackExporter`'s header lists where nbgrader's template says "Test cell";
- :class:`SanitizeOutputs` cleans every output the submission brought (under stock
  ``Execute`` a student's code writes HTML, JavaScript and image metadata into the notebook)
  before :class:`EmbedKitFeedback` adds the kit's own page;
- :class:`FeedbackExporter` (``c.GenerateFeedback.exporter_class``) renders nbgrader's feedback
  template with those titles, and every markdown cell through an HTML sanitizer
  (:func:`clean_html`), so a student's ``<img onerror=...>`` or ``<script>`` is shown as text
  or dropped, never run. nbconvert's own ``HTMLExporter.sanitize_html`` does not do it here:
  nbgrader's feedback template renders markdown cells itself, without it, and its allowlist
  would also drop the kit's page (an iframe) and escape every heading of the outputs.
"""

from __future__ import annotations

import base64
import binascii
import html
from typing import Any

import bleach
from bleach.css_sanitizer import CSSSanitizer
from jinja2 import DictLoader, pass_context
from jinja2.runtime import Context
from nbconvert.exporters import HTMLExporter
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, NbGraderPreprocessor
from nbgrader.utils import is_grade
from traitlets import Integer, List, default

from ..exercises import DEFAULT, EXERCISES, Exercise
from ..grading.results import SubmissionResult, submission_from_json
from ..grading.submission import exercise_of
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


def _exercise(nb: NotebookNode, resources: ResourcesDict) -> Exercise:
    """The notebook's exercise: the nbgrader assignment's, else the one the notebook names."""
    assignment = resources.get("nbgrader", {}).get("assignment")
    return EXERCISES.get(str(assignment)) or exercise_of(nb) or DEFAULT


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


# --- step names and a safe page ---------------------------------------------------------------

TITLE_KEY = "backprop_ninja"
"""Cell metadata key under which :class:`NameSteps` puts a grade cell's ``title``."""


class NameSteps(NbGraderPreprocessor):
    """Give each grade cell of a step its title ("Step 5 of 26: dcounts") in its metadata, for
    the header of the feedback (:data:`FEEDBACK_TEMPLATE`); other cells get none."""

    display_data_priority = _display_priority()

    def preprocess(
        self, nb: NotebookNode, resources: ResourcesDict
    ) -> tuple[NotebookNode, ResourcesDict]:
        ex = _exercise(nb, resources)
        index = {s.test_id: (i, s) for i, s in enumerate(ex.steps, start=1)}
        for cell in nb.cells:
            cell.metadata.pop(TITLE_KEY, None)  # only the kit names cells
            if not is_grade(cell):
                continue
            found = index.get(cell.metadata.nbgrader.get("grade_id", ""))
            if found is not None:
                i, step = found
                title = f"Step {i} of {len(ex.steps)}: {step.name}"
                cell.metadata[TITLE_KEY] = {"step": step.name, "title": title}
        return nb, resources


HTML_TAGS = frozenset(bleach.sanitizer.ALLOWED_TAGS) | {
    *"p div span pre code br hr img sup sub del s ins kbd samp var small mark q cite".split(),
    *"h1 h2 h3 h4 h5 h6 table thead tbody tfoot tr th td caption dl dt dd details summary".split(),
}
"""What a student's markdown (or a cell's HTML output) may keep: text markup, no scripts, no
forms, no frames, no styles."""

_ATTRIBUTES = {
    "*": {"class", "id", "title"},
    "a": {"href", "title", "rel"},
    "img": {"src", "alt", "title", "width", "height"},
    "th": {"align", "colspan", "rowspan"},
    "td": {"align", "colspan", "rowspan"},
}
_DATA_IMAGES = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;")


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if name not in _ATTRIBUTES.get(tag, set()) | _ATTRIBUTES["*"]:
        return False
    if value.strip().lower().startswith("data:"):  # embedded images only, and only in <img>
        return tag == "img" and name == "src" and value.strip().lower().startswith(_DATA_IMAGES)
    return True


_CLEANER = bleach.sanitizer.Cleaner(
    tags=HTML_TAGS,
    attributes=_allowed_attribute,
    protocols={"http", "https", "mailto", "data"},
    strip=False,  # a tag that is not allowed shows as text: the student sees what was dropped
    css_sanitizer=CSSSanitizer(allowed_css_properties=()),
)


def clean_html(text: str) -> str:
    """``text`` as HTML that runs nothing: tags outside :data:`HTML_TAGS` escaped, event
    handlers, styles and ``javascript:`` links dropped."""
    return str(_CLEANER.clean(text))


_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n")


def _is_base64(text: Any) -> bool:
    if not isinstance(text, str) or not set(text.encode()) <= _BASE64:
        return False
    try:
        base64.b64decode(text.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


class SanitizeOutputs(NbGraderPreprocessor):
    """Clean every output of the submission before the feedback shows it: HTML and markdown
    through :func:`clean_html`, images only as valid base64, plain text and LaTeX (which the
    template escapes) as they are, anything else (JavaScript, widgets, SVG) dropped, and no
    output metadata (nbconvert writes image sizes into unquoted attributes). Put it before
    :class:`EmbedKitFeedback`, whose page is the kit's own."""

    display_data_priority = _display_priority()

    def preprocess(
        self, nb: NotebookNode, resources: ResourcesDict
    ) -> tuple[NotebookNode, ResourcesDict]:
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(
        self, cell: NotebookNode, resources: ResourcesDict, cell_index: int
    ) -> tuple[NotebookNode, ResourcesDict]:
        for output in cell.get("outputs", []):
            if output.get("output_type") not in ("display_data", "execute_result"):
                continue  # streams and errors: text, escaped by the template
            output["metadata"] = {}
            data = output.get("data", {})
            for key in list(data):
                value = data[key]
                if key in ("text/html", "text/markdown") and isinstance(value, str):
                    data[key] = clean_html(value)
                elif key in ("image/png", "image/jpeg") and _is_base64(value):
                    pass
                elif key in ("text/plain", "text/latex", RESULT_MIME):
                    pass  # escaped by the template; the kit's result, read by EmbedKitFeedback
                else:
                    del data[key]
        return cell, resources


FEEDBACK_TEMPLATE_NAME = "backprop_ninja_feedback.html.j2"

FEEDBACK_TEMPLATE = """\
{%- extends 'index.html.j2' -%}
{#- nbgrader's feedback template (index.html.j2 of its 'feedback' template), whose header lists
    each grade cell as "Test cell": here each step's title instead, as NameSteps set it. -#}
{% block body %}
<body>
  <a name="top"></a>
  <div class="container">
    <div class="panel panel-default">
      <div class="panel-heading">
        <h4>{{ resources.nbgrader.notebook | escape_html }} (Score:
          {{- " " ~ resources.nbgrader.score | float | round(2) }} /
          {{- " " ~ resources.nbgrader.max_score | float | round(2) }})</h4>
        <div id="toc">
          <ol>
          {% for cell in nb.cells if cell.metadata.nbgrader %}
            {% set nbg = cell.metadata.nbgrader %}
            {% set title = cell.metadata.get('backprop_ninja', {}).get('title') %}
            {% set points -%}
              {% if nbg.grade or nbg.task -%}
              (Score: {{ nbg.score | float | round(2) }} / {{ nbg.points | float | round(2) }})
              {%- endif %}
            {%- endset %}
            {% if nbg.grade and not nbg.solution %}
            <li><a href="#{{ nbg.grade_id }}">{{ (title or 'Test cell') | escape_html }}</a>
              {{- " " ~ points }}</li>
            {% elif cell.cell_type == "code" and nbg.grade %}
            <li><a href="#{{ nbg.grade_id }}">Coding free-response</a> {{ points }}</li>
            {% elif cell.cell_type == "markdown" and nbg.grade %}
            <li><a href="#{{ nbg.grade_id }}">Written response</a> {{ points }}</li>
            {% elif cell.cell_type == "markdown" and nbg.task %}
            <li><a href="#{{ nbg.grade_id }}">Task</a> {{ points }}</li>
            {% endif %}
            {% if nbg.comment %}
            <li><a href="#comment-{{ nbg.grade_id }}">Comment</a></li>
            {% endif %}
          {% endfor %}
          {% if resources.nbgrader.late_penalty > 0 %}
            <li class="late-penalty">Late submission penalty
              (Score: -{{ resources.nbgrader.late_penalty | float | round(2) }})</li>
          {% endif %}
          </ol>
        </div>
      </div>
      <div class="panel-body">
        <div id="notebook" class="border-box-sizing">
          <div class="container" id="notebook-container">
            {{ super.super() }}
          </div>
        </div>
      </div>
    </div>
  </div>
</body>
{%- endblock body %}
"""
"""The feedback page's template: nbgrader's ``feedback`` template with the steps named in its
header (its ``body`` block, copied from nbgrader 0.9, but for the title of each grade cell)."""


class FeedbackExporter(HTMLExporter):
    """The HTML exporter of ``nbgrader generate_feedback`` for the kit (set it as
    ``c.GenerateFeedback.exporter_class``): nbgrader's feedback template with each step's title
    in the header (:data:`FEEDBACK_TEMPLATE`), and every markdown cell through
    :func:`clean_html`. nbgrader's own settings (``HTMLExporter.template_name = 'feedback'``
    and its template folder) still apply."""

    @default("extra_loaders")
    def _extra_loaders_default(self) -> list[DictLoader]:
        return [DictLoader({FEEDBACK_TEMPLATE_NAME: FEEDBACK_TEMPLATE})]

    @default("template_file")
    def _template_file_default(self) -> str:
        return FEEDBACK_TEMPLATE_NAME

    @pass_context
    def markdown2html(self, context: Context, source: str) -> str:
        """nbconvert's markdown rendering, then :func:`clean_html`: a student's markdown cell
        may hold raw HTML, which markdown passes through."""
        return clean_html(super().markdown2html(context, source))

"""One student's feedback page: the backward graph coloured by result, then each failing step with
its diagnoses, and for dC the rows of C the batch used and which of them are wrong.

``render_feedback`` is a pure function of one submission's result: ``backprop-ninja report
--per-student`` writes it for every submission, and nbgrader's feedback step shows the same page.
"""

from __future__ import annotations

import hashlib
import re
import string

from ..exercises import Exercise
from ..grading.results import RowReport, StepResult, SubmissionResult
from . import figures
from .pages import escape, exercise_of, figure, fmt, inline_markdown, page, step_status

_LECTURE_ROWS = "." + string.ascii_lowercase
"""The characters of C's rows in the lecture's vocabulary ('.' then a-z), for the dC strip."""


def render_feedback(sub: SubmissionResult, seed: int | None = None) -> str:
    """One student's page: the backward graph coloured by result, then every failing step with
    its diagnoses (and, for dC, the rows of C the batch used and which of them are wrong)."""
    ex = exercise_of(sub)
    order = {s.name: i for i, s in enumerate(ex.steps)}
    status = step_status(sub)
    passed = [n for n, s in status.items() if s == "pass"]
    failed = [r for r in sorted(sub.steps, key=lambda r: order.get(r.step, 99)) if not r.passed]
    ungraded = [n for n, s in status.items() if s == "ungraded"]

    head = [
        "<header><h1>Backprop ninja: your feedback</h1>",
        f'<p class="path mono">{escape(sub.path)}</p>',
        f'<dl class="totals"><div><dt>score</dt><dd>{fmt(sub.score)} / {fmt(sub.max_score)}'
        f"</dd></div><div><dt>steps passed</dt><dd>{len(passed)} / {len(ex.steps)}</dd></div>",
        f"<div><dt>seed</dt><dd>{seed}</dd></div>" if seed is not None else "",
        "</dl></header>",
    ]
    if sub.error:
        head.append(
            '<div class="error"><strong>Part of this notebook could not be graded.'
            f"</strong><pre>{escape(sub.error)}</pre></div>"
        )
    graph = figures.backward_graph(ex.id, tuple(status.items()))
    left = (
        '<div class="graph">'
        + figure(
            graph,
            "the backward graph, coloured by result",
            "Gradients flow down from the loss. Each box is a variable, coloured by your "
            "answer for its gradient (counts: dcounts).",
        )
        + "</div>"
    )
    right = ["<div>", "<h2>Steps to fix</h2>" if failed else "<h2>Every graded step passed</h2>"]
    right += [_failed_step(ex, r) for r in failed]
    if passed:
        right.append(f'<h2>Passed</h2><p class="mono">{escape(", ".join(passed))}</p>')
    if ungraded:
        right.append(
            "<h2>Not graded</h2><p>These answers were not found or could not run: "
            f'<span class="mono">{escape(", ".join(ungraded))}</span></p>'
        )
    right.append("</div>")
    body = "\n".join(head) + f'\n<main class="feedback">{left}\n{"".join(right)}</main>'
    return page(f"Backprop ninja feedback: {sub.path}", body)


def _failed_step(ex: Exercise, res: StepResult) -> str:
    step = ex.by_name.get(res.step)
    out = [
        f'<article class="step" id="{escape(res.step)}">',
        f'<h3><code>{escape(res.step)}</code> <span class="muted">{fmt(res.score)} / '
        f"{fmt(res.max_score)}</span></h3>",
    ]
    if step is not None:
        lines = "<br>".join(f"<code>{escape(line)}</code>" for line in ex.consumer_lines(step))
        out.append(
            f"<p>The gradient of <code>{escape(step.var)}</code> flows back through:<br>{lines}</p>"
        )
    if res.diagnoses:
        out.append(
            '<ul class="diagnoses">'
            + "".join(
                f'<li><span class="code">{escape(d.code)}</span>{inline_markdown(d.message)}</li>'
                for d in res.diagnoses
            )
            + "</ul>"
        )
    else:
        out.append("<p>The values differ from the expected gradient.</p>")
    facts = []
    if res.shape is not None and res.shape != res.expected_shape:
        facts.append(f"your shape {tuple(res.shape)}, expected {tuple(res.expected_shape)}")
    if res.maxdiff is not None:
        facts.append(f"largest difference {res.maxdiff:.3g}")
    bad_cases = [c.case for c in res.cases if not c.passed]
    if bad_cases:
        facts.append("failed configurations: " + ", ".join(bad_cases))
    if facts:
        out.append(f'<p class="muted">{escape("; ".join(facts))}</p>')
    if res.rows is not None and res.rows.uses:
        out.append(_rows_figure(res.rows))
    if step is not None:
        out.append(f"<details><summary>Hint</summary><p>{inline_markdown(step.text)}</p></details>")
    out.append("</article>")
    return "\n".join(out)


def _rows_figure(rows: RowReport) -> str:
    """The dC strip and a sentence on which rows are wrong: only repeated rows points at the
    scatter that drops duplicate indices."""
    uses, wrong = tuple(rows.uses), tuple(sorted(set(rows.wrong)))
    labels = tuple(_LECTURE_ROWS) if len(uses) == len(_LECTURE_ROWS) else ()
    repeated = {r for r, u in enumerate(uses) if u > 1}
    if not wrong:
        caption = "Every row of C is right in this configuration."
    elif set(wrong) == repeated:
        caption = (
            f"Exactly the {len(wrong)} rows the batch used more than once are wrong; "
            "the rows it used once are right."
        )
    elif set(wrong) < repeated:
        caption = (
            f"{len(wrong)} rows are wrong, all of them rows the batch used more than once "
            f"({len(repeated)} such rows); the rows it used once are right."
        )
    else:
        caption = f"{len(wrong)} of {len(uses)} rows are wrong, among them rows used at most once."
    svg = figures.row_strip(uses, wrong, labels)
    return figure(svg, "rows of C: uses and wrong rows", escape(caption))


def feedback_filename(path: str) -> str:
    """A safe, unique file name for a submission's feedback page: the tail of its path with
    every unusual character replaced, plus a short hash of the whole path."""
    stem = re.sub(r"\.ipynb$", "", path.replace("\\", "/"))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "_".join(p for p in stem.split("/")[-3:] if p))
    slug = re.sub(r"[._-]{2,}", "_", slug).strip("._-")[-60:].lstrip("._-") or "submission"
    digest = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}.html"

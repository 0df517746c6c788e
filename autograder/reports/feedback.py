"""One student's feedback page: the backward graph coloured by result, then each wrong step with
its diagnoses and what failed, and for dC the rows of C the batch used and which of them are
wrong. Steps not started are one line, not a card each: an untouched notebook is a short page.

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
from .text import case_facts, shape_fact, step_state

_LECTURE_ROWS = "." + string.ascii_lowercase
"""The characters of C's rows in the lecture's vocabulary ('.' then a-z), for the dC strip."""


def render_feedback(sub: SubmissionResult, seed: int | None = None) -> str:
    """One student's page: the exercise's picture coloured by result (the backward graph, or
    for a one-step exercise its verdict under each hidden configuration), then every wrong step
    with its diagnoses and what failed (for dC, the rows of C the batch used and which of them
    are wrong); steps not started, cells not found and passed steps one line each."""
    ex = exercise_of(sub)
    order = {s.name: i for i, s in enumerate(ex.steps)}
    status = step_status(sub)
    states = {r.step: step_state(r) for r in sub.steps}
    passed = [n for n, s in status.items() if s == "pass"]
    ordered = sorted(sub.steps, key=lambda r: order.get(r.step, 99))
    wrong = [r for r in ordered if states[r.step] == "wrong"]
    unstarted = [r.step for r in ordered if states[r.step] == "unstarted"]
    missing = [r for r in ordered if states[r.step] == "missing"]
    ungraded = [n for n, s in status.items() if s == "ungraded"]

    head = [
        "<header><h1>Backprop ninja: your feedback</h1>",
        f'<p class="path mono">{escape(sub.path)}</p>',
        f'<p class="muted">{escape(ex.text.title)}</p>',
        f'<dl class="totals"><div><dt>score</dt><dd>{fmt(sub.score)} / {fmt(sub.max_score)}'
        f"</dd></div><div><dt>steps passed</dt><dd>{len(passed)} / {len(ex.steps)}</dd></div>",
        f"<div><dt>seed</dt><dd>{seed}</dd></div>" if seed is not None else "",
        "</dl></header>",
    ]
    if sub.error and not missing:
        head.append(
            '<div class="error"><strong>Part of this notebook could not be graded.'
            f"</strong><pre>{escape(sub.error)}</pre></div>"
        )
    left = f'<div class="graph">{_picture(ex, status, sub)}</div>'
    if wrong:
        right = ["<div>", "<h2>Steps to fix</h2>"]
    elif passed and not (unstarted or missing or ungraded):
        right = ["<div>", "<h2>Every step passed</h2>"]
    else:
        right = ["<div>"]
    right += [_failed_step(ex, r) for r in wrong]
    if unstarted:
        right.append(
            f'<h2>Not started yet</h2><p class="unstarted">{len(unstarted)} of {len(ex.steps)} '
            "steps still hold the cell as released (<code>raise NotImplementedError</code>): "
            f'<span class="mono">{escape(", ".join(unstarted))}</span></p>'
        )
    if missing:
        why = "".join(
            f"<li><code>{escape(r.step)}</code>: {inline_markdown(r.diagnoses[0].message)}</li>"
            for r in missing
        )
        right.append(
            f'<h2>Answer cells not found</h2><p class="unstarted">{len(missing)} steps have no '
            f'single answer cell in this notebook: <span class="mono">'
            f"{escape(', '.join(r.step for r in missing))}</span>.</p>"
            f'<details><summary>Why, step by step</summary><ul class="why">{why}</ul></details>'
        )
    if passed:
        right.append(f'<h2>Passed</h2><p class="mono">{escape(", ".join(passed))}</p>')
    if ungraded:
        right.append(
            "<h2>Not graded</h2><p>These answers were not found or could not run: "
            f'<span class="mono">{escape(", ".join(ungraded))}</span></p>'
        )
    if wrong and len(ex.steps) > 1:
        right.append(_legend(ex, wrong))
    right.append("</div>")
    body = "\n".join(head) + f'\n<main class="feedback">{left}\n{"".join(right)}</main>'
    return page(f"Backprop ninja feedback: {sub.path}", body)


def _picture(ex: Exercise, status: dict[str, str], sub: SubmissionResult) -> str:
    """The backward graph of an exercise of several steps, coloured by result; for an exercise
    of one step, its verdict under each hidden configuration, in words."""
    gradients = [s for s in ex.steps if s.kind == "gradient"]
    if len(gradients) > 1:
        graph = figures.backward_graph(ex.id, tuple(status.items()))
        training = [s.name for s in ex.steps if s.kind == "training"]
        extra = (
            f" The bottom box, {escape(', '.join(training))}, is checked by a short training run "
            "with all your gradients."
            if training
            else ""
        )
        return figure(
            graph,
            "the backward graph, coloured by result",
            "Gradients flow down from the loss. Each box is a variable, coloured by your answer "
            "for its gradient (counts: dcounts); blue boxes are given." + extra,
        )
    # one step: its verdict under each hidden configuration, with what the configuration is
    results = {r.step: r for r in sub.steps}
    out = ['<figure class="expression">']
    words = {"pass": "passed", "fail": "failed", "unstarted": "not started"}
    for step in ex.steps:
        state = status.get(step.name, "ungraded")
        res = results.get(step.name)
        verdicts = {c.case: c.passed for c in res.cases} if res and state != "unstarted" else {}
        items = "".join(
            f'<li><span class="badge {_case_state(verdicts.get(c.name))}">{escape(c.name)}</span> '
            f"{escape(c.words)}</li>"
            for c in ex.cases
        )
        out.append(
            f'<p><span class="badge {state}">{escape(step.name)}: '
            f"{words.get(state, 'not graded')}</span></p>"
            f'<p>Under each hidden configuration:</p><ul class="cases">{items}</ul>'
        )
    out.append(
        "<figcaption>One expression for the whole gradient, graded under every one of these "
        "configurations; the seed above replays them exactly.</figcaption></figure>"
    )
    return "".join(out)


def _case_state(passed: bool | None) -> str:
    return "ungraded" if passed is None else "pass" if passed else "fail"


def _legend(ex: Exercise, wrong: list[StepResult]) -> str:
    """The hidden configurations in words, the ones a wrong step failed first."""
    failing = {c.case for r in wrong for c in r.cases if not c.passed}
    items = "".join(
        f"<dt><code>{escape(c.name)}</code>{' (failed)' if c.name in failing else ''}</dt>"
        f"<dd>{escape(c.words)}</dd>"
        for c in sorted(ex.cases, key=lambda c: c.name not in failing)
    )
    return (
        '<details class="legend"><summary>The hidden configurations</summary>'
        '<p class="muted">Each step is graded under every one of these; the seed above replays '
        f'them exactly.</p><dl class="cases">{items}</dl></details>'
    )


def _failed_step(ex: Exercise, res: StepResult) -> str:
    step = ex.by_name.get(res.step)
    out = [
        f'<article class="step" id="{escape(res.step)}">',
        f'<h3><code>{escape(res.step)}</code> <span class="muted">{fmt(res.score)} / '
        f"{fmt(res.max_score)}</span></h3>",
    ]
    if step is not None and step.kind == "gradient":
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
    facts = [escape(f)] if (f := shape_fact(res)) else []
    facts += [
        f'<code title="{escape(words)}">{escape(name)}</code>: {escape(why)}'
        if words
        else f"{escape(name)}: {escape(why)}"
        for name, words, why in case_facts(ex, res)
    ]
    if facts:
        out.append(
            '<p class="muted facts-title">What failed (hidden configurations, see the list '
            'below):</p><ul class="facts muted">'
            + "".join(f"<li>{f}</li>" for f in facts)
            + "</ul>"
        )
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

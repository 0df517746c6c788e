"""HTML reports of a grading run: one page for the instructor, one feedback page per student.

``backprop-ninja report RESULTS.json -o report.html [--per-student DIR]`` reads the JSON written
by ``grade --json`` and writes self-contained pages: figures are SVG embedded as ``data:`` images,
styles and the few lines of table-sorting script are inline, so the pages open offline and can be
mailed or uploaded as single files. Everything that comes from a submission (its path, error text,
diagnosis messages quoting student code) is HTML-escaped before it reaches a page.

The instructor's page has a section per exercise of the run. Steps not started (the answer cell
as released, or no answer cell) are told apart from mistakes everywhere: their own colour in the
pass rates, their own grey row under the diagnosis heatmap, their own mark in the table.

``render_feedback`` is a pure function of one submission's result; nbgrader's feedback step shows
the same page.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter
from pathlib import Path

from ..exercises import DEFAULT, EXERCISES, Exercise, Step
from ..grading.results import RunResult, SubmissionResult, run_from_json, write_atomic
from . import figures
from .feedback import feedback_filename, render_feedback
from .pages import escape, exercise_of, figure, fmt, inline_markdown, page, step_status
from .text import MISSING, UNSTARTED, step_state

__all__ = [
    "feedback_filename",
    "render_feedback",
    "render_report",
    "report_command",
    "write_report",
]

_SORT_JS = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = Array.from(table.tHead.rows[0].cells);
  function key(row, col) {
    var cell = row.cells[col];
    var v = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    var n = parseFloat(v);
    return isNaN(n) || String(n) !== v.trim() ? v.toLowerCase() : n;
  }
  function sortBy(th, col) {
    var asc = th.getAttribute("aria-sort") !== "ascending";
    heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var body = table.tBodies[0];
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a, col), y = key(b, col);
      var c = typeof x !== typeof y ? (typeof x === "number" ? -1 : 1)
                                     : x < y ? -1 : x > y ? 1 : 0;
      return asc ? c : -c;
    }).forEach(function (row) { body.appendChild(row); });
  }
  heads.forEach(function (th, col) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(th, col); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th, col); }
    });
  });
});
"""

_MARKS = {
    "pass": ("✓", "2", "passed"),
    "fail": ("✗", "0", "wrong"),
    "unstarted": ("·", "1", "not started"),
    "ungraded": ("", "-1", "not graded"),
}
"""A step's mark in the table: symbol, sort key (passed first when sorted down), and word."""

_NOT_A_MISTAKE = frozenset({UNSTARTED, MISSING})
"""Diagnoses that say a step was not started, shown apart from the mistakes."""


def render_report(run: RunResult, links: dict[str, str] | None = None) -> str:
    """The instructor's page for a run: a section per exercise, each with its totals, score
    histogram, pass rate per step (for a one-step exercise, failures per hidden configuration),
    diagnosis heatmap (mistakes; steps not started apart), the hidden configurations in words,
    and a sortable table of submissions (by score, then path) with a mark per step.

    ``links`` maps a submission's path to the (relative) address of its feedback page.
    """
    links = links or {}
    groups: dict[str, list[SubmissionResult]] = {}
    for sub in run.submissions:
        groups.setdefault(exercise_of(sub).id, []).append(sub)
    order = list(EXERCISES)
    ids = sorted(groups, key=lambda i: order.index(i) if i in order else len(order))
    parts = [
        "<header><h1>Backprop ninja: class report</h1>",
        f'<p class="muted">{escape(run.kit)} {escape(run.version)} · '
        f"{len(run.submissions)} submissions · replay this run with "
        f"<code>--seed {run.seed}</code></p></header>",
    ]
    if len(ids) > 1:
        parts.append(
            '<nav><p class="muted">Exercises in this run: '
            + " · ".join(
                f'<a href="#{escape(i)}">{escape(EXERCISES[i].text.title if i in EXERCISES else i)}'
                f"</a> ({len(groups[i])})"
                for i in ids
            )
            + "</p></nav>"
        )
    if not ids:
        parts += _section(DEFAULT, [], links)
    for i in ids:
        parts += _section(exercise_of(groups[i][0]), groups[i], links)
    return page("Backprop ninja: class report", "\n".join(parts), _SORT_JS)


def _section(
    ex: Exercise,
    subs: list[SubmissionResult],
    links: dict[str, str],
) -> list[str]:
    """The figures and tables of one exercise's submissions."""
    steps = ex.steps
    max_score = max((s.max_score for s in subs), default=ex.total_points) or ex.total_points
    scores = [s.score for s in subs]
    statuses = [step_status(s) for s in subs]
    names = [s.name for s in steps]

    rates = {
        st.name: (
            sum(x[st.name] == "pass" for x in statuses),
            sum(x[st.name] == "fail" for x in statuses),
            sum(x[st.name] == "unstarted" for x in statuses),
            sum(x[st.name] == "ungraded" for x in statuses),
        )
        for st in steps
    }
    cells: Counter[tuple[str, str]] = Counter()  # (code, step) -> submissions
    per_code: Counter[str] = Counter()  # code -> submissions
    example: dict[str, str] = {}
    case_fails: Counter[str] = Counter()  # case -> wrong answers failing under it
    answered = 0  # answers given (passed or wrong), over steps and submissions
    for sub in subs:
        codes_here: set[str] = set()
        for res in sub.steps:
            state = step_state(res)
            if state in ("pass", "wrong"):
                answered += 1
            if state == "wrong":
                case_fails.update(c.case for c in res.cases if not c.passed)
            for code in {d.code for d in res.diagnoses} - _NOT_A_MISTAKE:
                cells[(code, res.step)] += 1
                codes_here.add(code)
            for d in res.diagnoses:
                example.setdefault(d.code, d.message)
        per_code.update(codes_here)
    codes = sorted(per_code, key=lambda c: (-per_code[c], c))
    unstarted = {n: rates[n][2] for n in names}

    errors = sum(1 for s in subs if s.error and not s.steps)
    untouched = sum(1 for x in statuses if x and set(x.values()) == {"unstarted"})
    full = sum(1 for s in subs if s.score >= max_score)
    totals = [
        ("submissions", str(len(subs))),
        ("mean score", f"{statistics.fmean(scores):.1f} / {fmt(max_score)}" if subs else "–"),
        ("median", fmt(statistics.median(scores)) if subs else "–"),
        ("full marks", str(full)),
        ("not started", str(untouched)),
        ("unreadable", str(errors)),
    ]
    gradients = [s for s in steps if s.kind == "gradient"]
    if len(steps) > 1:
        per_step = figure(
            figures.pass_rates(names, rates),
            "pass rate per step",
            "Steps in the order of the exercise, from the loss down. Grey: not started (the "
            "cell as released), which is no mistake; dark grey: the notebook was not read.",
        )
    else:
        per_step = figure(
            figures.case_failures([c.name for c in ex.cases], case_fails, answered),
            "answers failing under each hidden configuration",
            "One step: how many of the answers given fail under each hidden configuration "
            "(see the table of configurations below).",
        )
    return [
        f'<section id="{escape(ex.id)}">',
        f'<h2>{escape(ex.text.title)} <span class="muted mono">{escape(ex.id)}</span></h2>',
        '<dl class="totals">'
        + "".join(f"<div><dt>{k}</dt><dd>{escape(v)}</dd></div>" for k, v in totals)
        + "</dl>",
        "<h3>Scores</h3>",
        figure(figures.score_histogram(scores, max_score), "histogram of scores"),
        "<h3>Pass rate per step</h3>" if len(steps) > 1 else "<h3>Failures per configuration</h3>",
        per_step,
        "<h3>Diagnoses per step</h3>" if len(steps) > 1 else "<h3>Diagnoses</h3>",
        figure(
            figures.diagnosis_heatmap(names, codes, cells, unstarted),
            "heatmap of diagnoses per step",
            "Number of submissions that received each diagnosis on each step; steps not "
            "started are counted apart, in the grey row.",
        )
        if len(steps) > 1
        else f'<p class="muted">{untouched} of {len(subs)} submissions not started.</p>',
        _diagnosis_table(codes, per_code, cells, example),
        _case_table(ex, case_fails, answered, gradients),
        "<h3>Submissions</h3>",
        '<p class="muted">Sorted by score, then path; click a column header to sort by it. '
        "✓ passed, ✗ wrong, · not started.</p>",
        _student_table(ex, subs, statuses, links),
        "</section>",
    ]


def _case_table(
    ex: Exercise, case_fails: Counter[str], answered: int, gradients: list[Step]
) -> str:
    """The legend of the hidden configurations: each one's name, what it is in words, and how
    many of the class's answers fail under it."""
    rows = "".join(
        f'<tr><td class="mono">{escape(c.name)}</td><td>{escape(c.words)}</td>'
        f'<td class="num">{case_fails[c.name]}</td></tr>'
        for c in ex.cases
    )
    training = [s.name for s in ex.steps if s.kind == "training"]
    note = (
        f" {escape(', '.join(training))} is graded by a short training run from each "
        "configuration's parameters."
        if training
        else ""
    )
    return (
        "<h3>The hidden configurations</h3>"
        f'<p class="muted">Every step runs under each of these ({len(gradients)} gradient '
        f"step{'s' if len(gradients) != 1 else ''}); the seed replays them exactly.{note}</p>"
        '<table class="cases"><thead><tr><th>configuration</th><th>what it is</th>'
        f"<th>wrong answers failing here (of {answered} answers given)</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _diagnosis_table(
    codes: list[str],
    per_code: Counter[str],
    cells: Counter[tuple[str, str]],
    example: dict[str, str],
) -> str:
    if not codes:
        return ""
    rows = []
    for code in codes:
        steps = sorted((n for (c, n) in cells if c == code), key=lambda n: -cells[(code, n)])
        where = ", ".join(f"{escape(n)} ({cells[(code, n)]})" for n in steps[:4])
        rows.append(
            f'<tr><td><span class="code">{escape(code)}</span></td>'
            f'<td class="num">{per_code[code]}</td><td class="mono">{where}</td>'
            f"<td>{inline_markdown(example[code])}</td></tr>"
        )
    return (
        '<table class="sortable diagnoses"><thead><tr><th>code</th><th>submissions</th>'
        "<th>most affected steps</th><th>example message</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _student_table(
    ex: Exercise,
    subs: list[SubmissionResult],
    statuses: list[dict[str, str]],
    links: dict[str, str],
) -> str:
    steps = ex.steps
    head = ["<th>submission</th>", '<th aria-sort="descending">score</th>']
    head += [f'<th class="step" title="{escape(s.name)}">{escape(s.name)}</th>' for s in steps]
    head.append("<th>error</th>")
    rows = []
    ranked = sorted(zip(subs, statuses, strict=True), key=lambda x: (-x[0].score, x[0].path))
    for sub, status in ranked:
        name = escape(sub.path)
        if sub.path in links:
            name = f'<a href="{escape(links[sub.path])}">{name}</a>'
        tds = [
            f'<td class="path">{name}</td>',
            f'<td class="num" data-sort="{sub.score:g}">{fmt(sub.score)}</td>',
        ]
        diagnosed = {r.step: r for r in sub.steps}
        for st in steps:
            mark, key, word = _MARKS[status[st.name]]
            res = diagnosed.get(st.name)
            codes = ", ".join(d.code for d in res.diagnoses) if res else ""
            tip = f"{st.name}: {word}" + (f" ({codes})" if codes and word == "wrong" else "")
            tds.append(
                f'<td class="mark {status[st.name]}" data-sort="{key}" '
                f'title="{escape(tip)}">{mark}</td>'
            )
        error = sub.error or ""
        short = error if len(error) <= 160 else error[:157] + "..."
        tds.append(f'<td class="error-text" title="{escape(error)}">{escape(short)}</td>')
        rows.append(f"<tr>{''.join(tds)}</tr>")
    return (
        '<div class="scroll"><table class="sortable students">'
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>\n{chr(10).join(rows)}\n</tbody>"
        "</table></div>"
    )


def write_report(run: RunResult, out: Path, per_student: Path | None = None) -> None:
    """Write the instructor's report to ``out`` and, with ``per_student``, one feedback page per
    submission into that folder (each file written atomically)."""
    out = Path(out)
    links: dict[str, str] = {}
    if per_student is not None:
        per_student = Path(per_student)
        for sub in run.submissions:
            target = per_student / feedback_filename(sub.path)
            write_atomic(target, render_feedback(sub, run.seed))
            rel = os.path.relpath(target.resolve(), out.resolve().parent)
            links[sub.path] = Path(rel).as_posix()
    write_atomic(out, render_report(run, links))


def report_command(args: argparse.Namespace) -> int:
    """``backprop-ninja report``: 0 when the pages were written, 1 if the results can't be read."""
    try:
        data = json.loads(Path(args.results).read_text(encoding="utf-8"))
        run = run_from_json(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(
            f"backprop-ninja report: cannot read results from {args.results}: {exc}. "
            "Give the file written by `backprop-ninja grade --json FILE`.",
            file=sys.stderr,
        )
        return 1
    write_report(run, args.output, args.per_student)
    print(f"wrote {args.output} ({len(run.submissions)} submissions)")
    if args.per_student is not None:
        print(f"wrote {len(run.submissions)} feedback pages into {args.per_student}")
    return 0

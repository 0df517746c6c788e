"""HTML reports of a grading run: one page for the instructor, one feedback page per student.

``backprop-ninja report RESULTS.json -o report.html [--per-student DIR]`` reads the JSON written
by ``grade --json`` and writes self-contained pages: figures are SVG embedded as ``data:`` images,
styles and the few lines of table-sorting script are inline, so the pages open offline and can be
mailed or uploaded as single files. Everything that comes from a submission (its path, error text,
diagnosis messages quoting student code) is HTML-escaped before it reaches a page.

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

from ..exercises import Exercise
from ..grading.results import RunResult, SubmissionResult, run_from_json, write_atomic
from . import figures
from .feedback import feedback_filename, render_feedback
from .pages import escape, exercise_of, figure, fmt, inline_markdown, page, step_status

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
    "pass": ("✓", "1", "passed"),
    "fail": ("✗", "0", "failed"),
    "ungraded": ("·", "-1", "not graded"),
}


def render_report(run: RunResult, links: dict[str, str] | None = None) -> str:
    """The instructor's page for a run: totals, score histogram, pass rate per step, diagnosis
    heatmap (codes x steps) and a sortable table of submissions with per-step marks.

    ``links`` maps a submission's path to the (relative) address of its feedback page.
    """
    links = links or {}
    groups: dict[str, list[SubmissionResult]] = {}
    for sub in run.submissions:
        groups.setdefault(exercise_of(sub).id, []).append(sub)
    if not groups:
        groups[""] = []
    parts = [
        "<header><h1>Backprop ninja: class report</h1>",
        f'<p class="muted">{escape(run.kit)} {escape(run.version)} · replay this run with '
        f"<code>--seed {run.seed}</code></p></header>",
    ]
    for subs in groups.values():
        ex = exercise_of(subs[0]) if subs else None
        parts += _section(run, ex, subs, links, titled=len(groups) > 1)
    return page("Backprop ninja: class report", "\n".join(parts), _SORT_JS)


def _section(
    run: RunResult,
    ex: Exercise | None,
    subs: list[SubmissionResult],
    links: dict[str, str],
    titled: bool,
) -> list[str]:
    """The figures and table of one exercise's submissions."""
    from ..exercises import DEFAULT

    ex = ex or DEFAULT
    steps = ex.steps
    max_score = max((s.max_score for s in subs), default=ex.total_points) or ex.total_points
    scores = [s.score for s in subs]
    statuses = [step_status(s) for s in subs]
    names = [s.name for s in steps]

    rates = {
        st.name: (
            sum(x[st.name] == "pass" for x in statuses),
            sum(x[st.name] == "fail" for x in statuses),
            sum(x[st.name] == "ungraded" for x in statuses),
        )
        for st in steps
    }
    cells: Counter[tuple[str, str]] = Counter()  # (code, step) -> submissions
    per_code: Counter[str] = Counter()  # code -> submissions
    example: dict[str, str] = {}
    for sub in subs:
        codes_here: set[str] = set()
        for res in sub.steps:
            for code in {d.code for d in res.diagnoses}:
                cells[(code, res.step)] += 1
                codes_here.add(code)
            for d in res.diagnoses:
                example.setdefault(d.code, d.message)
        per_code.update(codes_here)
    codes = sorted(per_code, key=lambda c: (-per_code[c], c))

    errors = sum(1 for s in subs if s.error)
    full = sum(1 for s in subs if s.score >= max_score)
    totals = [
        ("submissions", str(len(subs))),
        ("mean score", f"{statistics.fmean(scores):.1f} / {fmt(max_score)}" if subs else "–"),
        ("median", fmt(statistics.median(scores)) if subs else "–"),
        ("full marks", str(full)),
        ("with errors", str(errors)),
        ("seed", str(run.seed)),
    ]
    parts = [
        f"<h2>{escape(ex.text.title)}</h2>" if titled else "",
        '<dl class="totals">'
        + "".join(f"<div><dt>{k}</dt><dd>{escape(v)}</dd></div>" for k, v in totals)
        + "</dl>",
        "<h2>Scores</h2>",
        figure(figures.score_histogram(scores, max_score), "histogram of scores"),
        "<h2>Pass rate per step</h2>",
        figure(
            figures.pass_rates(names, rates),
            "pass rate per step",
            "Steps in the order of the exercise, from the loss down to the embedding table.",
        ),
        "<h2>Diagnoses per step</h2>",
        figure(
            figures.diagnosis_heatmap(names, codes, cells),
            "heatmap of diagnoses per step",
            "Number of submissions that received each diagnosis on each step.",
        ),
        _diagnosis_table(codes, per_code, cells, example),
        "<h2>Submissions</h2>",
        '<p class="muted">Click a column header to sort.</p>',
        _student_table(ex, subs, statuses, links),
    ]
    return parts


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
    head = ["<th>submission</th>", "<th>score</th>"]
    head += [f'<th class="step" title="{escape(s.name)}">{escape(s.name)}</th>' for s in steps]
    head.append("<th>error</th>")
    rows = []
    for sub, status in zip(subs, statuses, strict=True):
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
            tip = f"{st.name}: {word}" + (f" ({codes})" if codes else "")
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

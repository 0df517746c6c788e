"""Building blocks shared by the HTML pages of the reports: the style sheet, escaping, the page
shell and figures embedded as ``data:`` images.

Every page is one self-contained file: styles inline, figures as base64 SVG, no fonts, scripts or
anything else fetched from the network. Text from a submission always goes through ``escape``.
"""

from __future__ import annotations

import base64
import html
import re

from ..exercises import DEFAULT, EXERCISES, Exercise
from ..grading.results import SubmissionResult
from .text import printable, step_state

CSS = """
:root { color-scheme: light; --pass: #2e7d32; --fail: #c62828; --ungraded: #9e9e9e; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 0 auto; max-width: 1200px; padding: 1.5rem; color: #212121; background: #fff; }
h1 { font-size: 1.6rem; margin: 0 0 .3rem; } h2 { margin-top: 2rem; font-size: 1.25rem; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
              font-size: .9em; }
.muted { color: #616161; } .path { overflow-wrap: anywhere; }
dl.totals { display: flex; flex-wrap: wrap; gap: .5rem 2rem; margin: 1rem 0; }
dl.totals div { min-width: 7rem; } dl.totals dt { color: #616161; font-size: .85rem; }
dl.totals dd { margin: 0; font-size: 1.3rem; font-weight: 600; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { color: #616161; font-size: .9rem; }
table { border-collapse: collapse; font-size: .85rem; }
th, td { border: 1px solid #e0e0e0; padding: .2rem .4rem; text-align: left; }
thead th { background: #f5f5f5; position: sticky; top: 0; }
table.sortable thead th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
th.step { writing-mode: vertical-rl; transform: rotate(180deg); padding: .4rem .1rem;
          font-weight: 500; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
td.mark { text-align: center; color: #fff; font-weight: 700; width: 1.2rem; padding: .2rem 0; }
td.pass { background: var(--pass); } td.fail { background: var(--fail); }
td.ungraded { background: #eeeeee; color: #757575; } td.num { text-align: right; }
.scroll { overflow-x: auto; max-height: 80vh; }
.error { border-left: 4px solid var(--fail); background: #ffebee; padding: .5rem 1rem; }
.error pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
.feedback { display: grid; grid-template-columns: minmax(280px, 420px) 1fr; gap: 2rem; }
.feedback .graph img { width: 100%; } .graph { position: sticky; top: 0; align-self: start; }
@media (max-width: 800px) { .feedback { grid-template-columns: 1fr; } .graph { position: static; } }
article.step { border: 1px solid #e0e0e0; border-left: 5px solid var(--fail); border-radius: 4px;
               padding: .6rem 1rem; margin: 0 0 1rem; }
article.step h3 { margin: 0 0 .4rem; font-size: 1.1rem; }
ul.diagnoses { padding-left: 1.2rem; } ul.diagnoses li { margin: .3rem 0; overflow-wrap: anywhere; }
.code { display: inline-block; background: #fce4ec; color: #880e4f; border-radius: 3px;
        padding: 0 .35rem; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
        font-size: .8rem; margin-right: .3rem; }
details { margin-top: .5rem; } summary { cursor: pointer; color: #1565c0; }
td.unstarted { background: #eceff1; color: #90a4ae; }
p.unstarted { border-left: 4px solid #b0bec5; padding: .3rem .8rem; background: #f5f7f8; }
ul.facts { margin: .2rem 0; padding-left: 1.2rem; font-size: .9rem; }
.facts-title { margin: .4rem 0 0; font-size: .9rem; }
.badge { display: inline-block; border-radius: 4px; padding: .2rem .6rem; color: #fff;
         font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-weight: 700; }
.badge.pass { background: var(--pass); } .badge.fail { background: var(--fail); }
.badge.unstarted { background: #cfd8dc; color: #37474f; }
.badge.ungraded { background: var(--ungraded); }
pre.lines { background: #f5f5f5; padding: .5rem; white-space: pre-wrap; overflow-wrap: anywhere; }
ul.cases { list-style: none; padding: 0; } ul.cases li { margin: .35rem 0; }
ul.cases .badge { font-size: .8rem; padding: .05rem .4rem; margin-right: .3rem; }
dl.cases dt { margin-top: .4rem; } dl.cases dd { margin-left: 1.2rem; color: #424242; }
table.cases td:first-child { white-space: nowrap; }
"""


def escape(text: object) -> str:
    """HTML-escape anything for use in text or a quoted attribute; a student's text may carry
    lone surrogates (which no page can be encoded with), controls and bidirectional overrides,
    each shown as its escape (:func:`~autograder.reports.text.printable`)."""
    return html.escape(printable(str(text)), quote=True)


def image(svg: str, alt: str) -> str:
    """An ``<img>`` holding the SVG document itself (base64), so nothing is fetched; as an image,
    the SVG can run no script and its ids cannot clash with another figure's."""
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{escape(alt)}">'


def figure(svg: str, alt: str, caption: str = "") -> str:
    """A ``<figure>`` of one SVG; ``caption`` is HTML, so the caller escapes any text in it."""
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f'<figure class="plot">{image(svg, alt)}{cap}</figure>'


def page(title: str, body: str, script: str = "") -> str:
    """A complete HTML document around ``body`` (HTML), with the style sheet and an optional inline
    script (the page's own code, never text from a submission)."""
    js = f"<script>{script}</script>" if script else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n{js}\n"
        "</body>\n</html>\n"
    )


def exercise_of(sub: SubmissionResult) -> Exercise:
    """The exercise a result was graded as (Exercise 1 for results of older kits)."""
    return EXERCISES.get(sub.exercise, DEFAULT)


def step_status(sub: SubmissionResult) -> dict[str, str]:
    """Each step of a submission's exercise: "pass", "fail" (a real mistake), "unstarted" (the
    cell as released, or no answer cell: no mistake) or "ungraded" (the notebook was not read)."""
    states = {"pass": "pass", "wrong": "fail", "unstarted": "unstarted", "missing": "unstarted"}
    graded = {s.step: states[step_state(s)] for s in sub.steps}
    return {s.name: graded.get(s.name, "ungraded") for s in exercise_of(sub).steps}


def fmt(x: float) -> str:
    """A score without trailing zeros: 26, 25.5."""
    return f"{x:g}"


def inline_markdown(text: str) -> str:
    """Text with `code` and **bold** marked up, escaped first (so safe for untrusted text)."""
    out = escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)

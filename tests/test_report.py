"""The instructor report and the student feedback pages, rendered from a run of mixed outcomes."""

from __future__ import annotations

import argparse
import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from autograder.cli import main as cli_main
from autograder.exercises import DEFAULT
from autograder.grading.results import (
    CaseResult,
    Diagnosis,
    RowReport,
    RunResult,
    StepResult,
    SubmissionResult,
    run_from_json,
    write_json,
)
from autograder.reports import figures, report

STEPS = DEFAULT.steps

HOSTILE = "submitted/<script>alert(1)</script>/../\"x\" & 'y'.ipynb"
SCATTER = Diagnosis(
    "scatter-drops-duplicates",
    "dC is right on every row of C the batch uses once and wrong on exactly the rows it uses "
    "several times: accumulate every use, with a loop or `index_add_`.",
)
MISSING = Diagnosis(
    "missing-branch",
    "dcounts has only the path through probs; add the path through counts_sum with `+=`.",
)
QUOTING = Diagnosis("error", "Your code raised NameError: name '<img src=x onerror=alert(2)>'.")


def _step(
    name: str, passed: bool, *diagnoses: Diagnosis, rows: RowReport | None = None
) -> StepResult:
    return StepResult(
        step=name,
        passed=passed,
        score=1.0 if passed else 0.0,
        max_score=1.0,
        maxdiff=0.0 if passed else 0.25,
        exact=passed,
        shape=[27, 10],
        expected_shape=[27, 10],
        dtype="float32",
        diagnoses=list(diagnoses),
        cases=[
            CaseResult(
                "lecture", passed, 0.0 if passed else 0.25, 1e-5, "ok" if passed else "wrong-value"
            ),
            CaseResult("random-upstream", passed, 0.0, 1e-5, "ok"),
        ],
        rows=rows,
    )


def _submission(
    path: str, fails: dict[str, list[Diagnosis]], rows: RowReport | None = None
) -> SubmissionResult:
    steps = [
        _step(
            s.name,
            s.name not in fails,
            *fails.get(s.name, []),
            rows=rows if s.name == "dC" else None,
        )
        for s in STEPS
    ]
    score = sum(s.score for s in steps)
    return SubmissionResult(path=path, score=score, max_score=len(STEPS), error=None, steps=steps)


def mixed_run() -> RunResult:
    """Four submissions: a perfect one, one with the scatter bug and a missing branch, one whose
    notebook could not be read (error, no steps), and one with a hostile path and message."""
    uses = [0] * 27
    for r, k in {1: 4, 5: 1, 9: 3, 13: 1, 18: 2, 0: 6}.items():
        uses[r] = k
    rows = RowReport(uses=uses, wrong=[0, 1, 9, 18], repeated=[0, 1, 9, 18])
    return RunResult(
        seed=1234,
        version="0.1.0",
        submissions=[
            _submission("submitted/alice/backprop_ninja.ipynb", {}),
            _submission(
                "submitted/bob/backprop_ninja.ipynb", {"dC": [SCATTER], "dcounts": [MISSING]}, rows
            ),
            SubmissionResult(
                path="submitted/carol/backprop_ninja.ipynb",
                score=0.0,
                max_score=26.0,
                error="not a notebook: invalid JSON",
                steps=[],
            ),
            _submission(HOSTILE, {"dlogits": [QUOTING], "dcounts": [MISSING]}),
        ],
    )


class _Structure(HTMLParser):
    """Counts what the tests look for; fails loudly on a script the page did not put there."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.scripts = 0
        self.body_rows = 0
        self.links: list[str] = []
        self._tbody = 0
        self._table_classes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.images.append(a.get("src") or "")
        elif tag == "script":
            self.scripts += 1
        elif tag == "table":
            self._table_classes.append(a.get("class") or "")
        elif tag == "tbody":
            self._tbody += 1
        elif tag == "tr" and self._tbody and "students" in self._table_classes[-1]:
            self.body_rows += 1
        elif tag == "a":
            self.links.append(a.get("href") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._tbody -= 1
        elif tag == "table":
            self._table_classes.pop()


def _parse(page: str) -> _Structure:
    p = _Structure()
    p.feed(page)
    p.close()
    return p


def _svgs(p: _Structure) -> list[str]:
    prefix = "data:image/svg+xml;base64,"
    return [
        base64.b64decode(src[len(prefix) :]).decode() for src in p.images if src.startswith(prefix)
    ]


def test_report_has_three_embedded_figures_and_one_table_row_per_submission() -> None:
    run = mixed_run()
    page = report.render_report(run)
    p = _parse(page)
    svgs = _svgs(p)
    assert len(svgs) == 3 and all(s.lstrip().startswith("<svg") for s in svgs)
    assert p.body_rows == len(run.submissions)
    assert p.scripts == 1  # the sorting script, nothing else
    assert "--seed 1234" in page
    assert "scatter-drops-duplicates" in page and "missing-branch" in page


def test_a_long_error_is_shortened_in_the_table_and_kept_whole_in_its_tooltip() -> None:
    run = mixed_run()
    run.submissions[2].error = "Traceback: " + "x" * 5000
    page = report.render_report(run)
    assert page.count("x" * 5000) == 1 and "x" * 146 + "..." in page


def test_report_needs_no_network() -> None:
    page = report.render_report(mixed_run())
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page


def test_hostile_path_and_messages_are_escaped_everywhere(tmp_path: Path) -> None:
    run = mixed_run()
    out = tmp_path / "report.html"
    report.write_report(run, out, tmp_path / "students")
    pages = [out.read_text(), *(f.read_text() for f in (tmp_path / "students").iterdir())]
    for page in pages:
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert _parse(page).scripts <= 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0]


def test_per_student_pages_are_written_one_per_submission_and_linked(tmp_path: Path) -> None:
    run = mixed_run()
    out = tmp_path / "out" / "report.html"
    report.write_report(run, out, tmp_path / "students")
    files = sorted((tmp_path / "students").iterdir())
    assert len(files) == len(run.submissions)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+\.html", f.name) for f in files)
    links = _parse(out.read_text()).links
    assert sorted((out.parent / link).resolve() for link in links) == [f.resolve() for f in files]
    assert not list(tmp_path.rglob("*.tmp"))


def test_feedback_filenames_are_safe_and_distinct() -> None:
    paths = [HOSTILE, "a/b.ipynb", "a_b.ipynb", "../../etc/passwd", "", "..", "/" * 5, "é€.ipynb"]
    names = [report.feedback_filename(p) for p in paths]
    assert len(set(names)) == len(names)
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*-[0-9a-f]{8}\.html", name), name
        assert len(name) <= 80


def test_feedback_lists_each_failing_step_with_its_diagnoses_and_the_dC_strip() -> None:
    bob = mixed_run().submissions[1]
    page = report.render_feedback(bob, seed=1234)
    assert page.count('<article class="step"') == 2
    assert page.index('id="dcounts"') < page.index('id="dC"')  # catalog order
    assert "scatter-drops-duplicates" in page and "<code>index_add_</code>" in page
    assert "Exactly the 4 rows the batch used more than once are wrong" in page
    svgs = _svgs(_parse(page))
    assert len(svgs) == 2  # the backward graph and the rows of C
    assert "<script" not in page


def test_feedback_of_an_unreadable_notebook_shows_the_error_and_an_all_grey_graph() -> None:
    carol = mixed_run().submissions[2]
    page = report.render_feedback(carol)
    assert "not a notebook: invalid JSON" in page
    assert "Not graded" in page and '<article class="step"' not in page
    assert len(_svgs(_parse(page))) == 1


def test_graph_colours_follow_the_results() -> None:
    status = tuple((s.name, "pass") for s in STEPS)
    all_pass = figures.backward_graph(DEFAULT.id, status)
    one_fail = figures.backward_graph(DEFAULT.id, (("dC", "fail"), *status[:-1]))
    fail, ok = figures.FAIL, figures.PASS
    assert one_fail.count(fail) > all_pass.count(fail)  # the legend has one of each
    assert one_fail.count(ok) < all_pass.count(ok)


def test_pages_are_deterministic() -> None:
    assert report.render_report(mixed_run()) == report.render_report(mixed_run())


def test_report_of_an_empty_run_still_renders() -> None:
    page = report.render_report(RunResult(seed=0))
    assert _parse(page).body_rows == 0 and "no diagnoses" not in page  # text is in the figure


def test_report_command_reads_the_json_the_grader_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = mixed_run()
    results = tmp_path / "results.json"
    write_json(results, run.to_json())
    assert run_from_json(json.loads(results.read_text())) == run
    args = argparse.Namespace(
        results=results, output=tmp_path / "r.html", per_student=tmp_path / "fb"
    )
    assert report.report_command(args) == 0
    assert (tmp_path / "r.html").exists() and len(list((tmp_path / "fb").iterdir())) == 4
    assert "wrote" in capsys.readouterr().out


def test_cli_report_writes_the_report_and_feedback_pages(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    write_json(results, mixed_run().to_json())
    out, fb = tmp_path / "report.html", tmp_path / "feedback"
    assert cli_main(["report", str(results), "-o", str(out), "--per-student", str(fb)]) == 0
    assert _parse(out.read_text()).body_rows == 4 and len(list(fb.glob("*.html"))) == 4


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"submissions": [{"x": 1}]}'])
def test_report_command_explains_an_unreadable_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    results = tmp_path / "results.json"
    results.write_text(content)
    args = argparse.Namespace(results=results, output=tmp_path / "r.html", per_student=None)
    assert report.report_command(args) == 1
    assert "grade --json" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()

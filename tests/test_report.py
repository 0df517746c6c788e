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
from autograder.cli.grade import batch_table
from autograder.exercises import DEFAULT, EXERCISES, Exercise
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
UNSTARTED = Diagnosis("not-implemented", "not implemented yet: replace the raise with your code.")


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


# --- steps not started, what failed, runs of several exercises ---------------------------------


def untouched_result(path: str, ex: Exercise = DEFAULT) -> SubmissionResult:
    steps = [
        StepResult(
            step=s.name,
            passed=False,
            score=0.0,
            max_score=s.points,
            maxdiff=None,
            exact=None,
            shape=None,
            expected_shape=[1],
            dtype=None,
            diagnoses=[UNSTARTED],
            cases=[CaseResult(c.name, False, None, None, "not-implemented") for c in ex.cases],
        )
        for s in ex.steps
    ]
    return SubmissionResult(path, 0.0, ex.total_points, None, steps, exercise=ex.id)


def _answered(path: str, ex: Exercise, fails: dict[str, StepResult]) -> SubmissionResult:
    steps = [
        fails.get(s.name)
        or StepResult(s.name, True, s.points, s.points, 0.0, True, [3], [3], "float32")
        for s in ex.steps
    ]
    return SubmissionResult(
        path, sum(s.score for s in steps), ex.total_points, None, steps, exercise=ex.id
    )


def test_an_untouched_notebook_gives_one_line_not_a_card_per_step() -> None:
    page = report.render_feedback(untouched_result("class/cy.ipynb"), seed=3)
    assert '<article class="step"' not in page and "Steps to fix" not in page
    assert page.count("Not started yet") == 1
    assert "26 of 26 steps still hold the cell as released" in page
    assert "dlogprobs, dprobs" in page and "not implemented yet" not in page
    assert len(_svgs(_parse(page))) == 1  # the graph, all of it "not started"


def test_a_step_right_on_the_lecture_case_says_which_configurations_failed_and_what_they_are() -> (
    None
):
    shortcut = StepResult(
        step="dlogit_maxes",
        passed=False,
        score=0.0,
        max_score=1.0,
        maxdiff=0.0,  # right where the true gradient is ~0
        exact=True,
        shape=[32, 1],
        expected_shape=[32, 1],
        dtype="float32",
        diagnoses=[Diagnosis("upstream-shortcut", "right at the true gradient only")],
        cases=[
            CaseResult("lecture", True, 0.0, 1e-5, "ok"),
            CaseResult("lecture-vjp", False, 0.75, 2e-5, "wrong-value"),
            CaseResult("sizes-a", False, None, None, "shape-mismatch"),
        ],
    )
    sub = _answered("class/dee.ipynb", DEFAULT, {"dlogit_maxes": shortcut})
    page = report.render_feedback(sub, seed=3)
    assert not re.search(r"largest difference 0(?![.\d])", page)
    assert "largest difference 0.75" in page
    vjp = next(c for c in DEFAULT.cases if c.name == "lecture-vjp")
    assert f'<code title="{vjp.words}">lecture-vjp</code>: wrong values' in page.replace(
        "&#x27;", "'"
    )
    assert "<code>lecture</code>" not in page.split("What failed")[1].split("</ul>")[0]
    assert "sizes-a</code>: wrong shape" in page
    assert "The hidden configurations" in page  # the legend, every configuration in words


def test_a_wrong_shape_is_shown_got_against_expected() -> None:
    bad = StepResult(
        "dbnmeani", False, 0.0, 1.0, None, None, [64], [1, 64], "float32",
        [Diagnosis("shape-mismatch", "the sum dropped a dimension")],
        [CaseResult(c.name, False, None, None, "shape-mismatch") for c in DEFAULT.cases],
    )  # fmt: skip
    page = report.render_feedback(_answered("x.ipynb", DEFAULT, {"dbnmeani": bad}))
    assert "your shape (64,), expected (1, 64)" in page
    assert f"every configuration ({len(DEFAULT.cases)}): wrong shape" in page


def mixed_exercises_run() -> RunResult:
    """Every exercise of the kit in one run, right, wrong and untouched."""
    ce, bn, mt = (EXERCISES[i] for i in ("cross_entropy_backward", "batchnorm_backward",
                                         "manual_training"))  # fmt: skip
    wrong = StepResult(
        "dlogits", False, 0.0, 1.0, 0.3, False, [32, 27], [32, 27], "float32",
        [Diagnosis("wrong-value", "re-derive it")],
        [CaseResult(c.name, False, 0.3, 1e-5, "wrong-value") for c in ce.cases],
    )  # fmt: skip
    update = StepResult(
        "update", False, 0.0, 2.0, 1.0, None, [5], [5], "float32",
        [Diagnosis("update-sign", "moves up the gradient")],
        [CaseResult(c.name, False, 1.0, 1e-3, "wrong-value") for c in mt.cases],
    )  # fmt: skip
    run = mixed_run()
    run.submissions += [
        _answered("ex2/right.ipynb", ce, {}),
        _answered("ex2/wrong.ipynb", ce, {"dlogits": wrong}),
        untouched_result("ex3/untouched.ipynb", bn),
        _answered("ex4/sign.ipynb", mt, {"update": update}),
        untouched_result("ex4/untouched.ipynb", mt),
    ]
    return run


def test_a_run_of_several_exercises_has_a_section_each_with_its_configurations_in_words() -> None:
    page = report.render_report(mixed_exercises_run())
    for ex in EXERCISES.values():
        assert page.count(f'<section id="{ex.id}">') == 1
        section = page.split(f'<section id="{ex.id}">')[1].split("</section>")[0]
        assert ex.text.title in section
        for case in ex.cases:  # the legend of the hidden configurations
            assert html_text(case.words) in section, (ex.id, case.name)
    p = _parse(page)
    # Exercise 1 and 4: scores, pass rate per step, heatmap; 2 and 3: scores, failures per case
    assert len(_svgs(p)) == 3 + 2 + 2 + 3
    assert p.body_rows == 4 + 2 + 1 + 2


def test_the_table_is_sorted_by_score_then_name_and_not_started_is_no_mistake() -> None:
    page = report.render_report(mixed_run())
    table = page.split('class="sortable students"')[1]
    order = [table.index(report.escape(s.path)) for s in mixed_run().submissions]
    alice, bob, carol, hostile = order
    assert alice < hostile < bob < carol  # 26, 24 (path "<" sorts before "b"), 24, 0
    run = mixed_run()
    run.submissions.append(untouched_result("submitted/dan/backprop_ninja.ipynb"))
    page = report.render_report(run)
    diagnoses = page.split('class="sortable diagnoses"')[1].split("</table>")[0]
    assert "not-implemented" not in diagnoses and "missing-branch" in diagnoses
    assert "<dt>not started</dt><dd>1</dd>" in page


def test_feedback_pages_of_every_exercise_draw_their_picture() -> None:
    run = mixed_exercises_run()
    by_path = {s.path: s for s in run.submissions}
    one_step = report.render_feedback(by_path["ex2/wrong.ipynb"], seed=1)
    assert not _svgs(_parse(one_step))  # one step: its verdict per configuration instead
    cases = EXERCISES["cross_entropy_backward"].cases
    assert one_step.count('<span class="badge fail">') == 1 + len(cases)  # the step, each case
    assert '<article class="step"' in one_step
    training = report.render_feedback(by_path["ex4/sign.ipynb"], seed=1)
    assert len(_svgs(_parse(training))) == 1 and "short training run" in training
    assert training.count('<article class="step"') == 1
    untouched = report.render_feedback(by_path["ex4/untouched.ipynb"], seed=1)
    assert "14 of 14 steps still hold the cell as released" in untouched


def test_the_graph_of_a_training_exercise_has_a_box_for_the_update() -> None:
    mt = EXERCISES["manual_training"]
    status = tuple((s.name, "pass") for s in mt.steps)
    with_update_failed = figures.backward_graph(mt.id, (*status[:-1], ("update", "fail")))
    assert with_update_failed.count(figures.FAIL) > figures.backward_graph(mt.id, status).count(
        figures.FAIL
    )


def test_the_batch_table_of_a_mixed_class_fits_80_columns() -> None:
    from rich.console import Console

    run = mixed_exercises_run()
    run.submissions[2].error = "the file is not a Jupyter notebook " * 5
    run.submissions.append(untouched_result("a/very/long/path/" * 6 + "backprop_ninja.ipynb"))
    console = Console(width=80, record=True)
    console.print(batch_table(run.submissions))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "26 not started" in text and "dcounts, dC" in text


def html_text(text: str) -> str:
    """``text`` as the pages escape it."""
    return report.escape(text)

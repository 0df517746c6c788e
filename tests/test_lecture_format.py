"""Notebooks in the lecture's own format: found, read by data flow and graded like the kit's.

The corpus (:mod:`tests.lecture_notebooks`) is graded in one batch by the session's grader;
each step must get its expected verdict, and each notebook only the exercises it answers.
The reader's parts (names, attempts, temporaries, where) are checked on their own too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.engine.grader import Grader
from autograder.exercises import (
    BACKPROP_NINJA,
    BATCHNORM_BACKWARD,
    CROSS_ENTROPY_BACKWARD,
    MANUAL_TRAINING,
)
from autograder.grading.cell_parse import parse_cell
from autograder.grading.lecture import read_lecture
from autograder.grading.lecture_code import MAX_CODE_CHARS, MAX_STATEMENTS
from autograder.grading.loading import load_assignment, load_submission, load_submissions
from autograder.grading.results import SubmissionResult

from .lecture_notebooks import (
    CASES,
    CE,
    EX1,
    LectureCase,
    answer,
    code,
    exercise1,
    exercise2,
    forward,
    setup,
)
from .notebooks import make_notebook

BY_NAME = {c.name: c for c in CASES}


@pytest.fixture(scope="module")
def corpus(grader: Grader, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    """Every notebook of the corpus graded at once: name -> its results, in yield order."""
    folder = tmp_path_factory.mktemp("lecture")
    paths = {c.write(folder): c.name for c in CASES}
    out: dict[str, list[SubmissionResult]] = {name: [] for name in paths.values()}
    for result in grader.grade_paths(list(paths)):
        out[paths[Path(result.path)]].append(result)
    return out


def test_the_corpus_covers_at_least_fifteen_structures() -> None:
    assert len(CASES) >= 15
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_notebook_is_graded_as_the_exercises_it_answers(
    case: LectureCase, corpus: dict[str, list[SubmissionResult]]
) -> None:
    results = corpus[case.name]
    assert [r.exercise for r in results] == list(case.exercises)
    assert all(r.format == "lecture" for r in results)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_step_gets_its_expected_verdict(
    case: LectureCase, corpus: dict[str, list[SubmissionResult]]
) -> None:
    wrong = []
    for result in corpus[case.name]:
        for s in result.steps:
            want = case.expected(result.exercise, s.step)
            got = "pass" if s.passed else (s.diagnoses[0].code if s.diagnoses else "?")
            if got != want:
                why = s.diagnoses[0].message if s.diagnoses else ""
                wrong.append(f"{result.exercise}:{s.step}: {got}, expected {want} ({why})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("case", [c for c in CASES if c.where], ids=lambda c: c.name)
def test_each_answer_says_where_it_was_found(
    case: LectureCase, corpus: dict[str, list[SubmissionResult]]
) -> None:
    main = corpus[case.name][0]
    for step, where in case.where.items():
        assert main.step(step).where == where


def test_a_step_with_no_answer_says_what_was_looked_for(
    corpus: dict[str, list[SubmissionResult]],
) -> None:
    main = corpus["unfinished"][0]
    missing = main.step("dbnvar")
    assert missing.where is None
    [d] = missing.diagnoses
    assert d.code == "not-implemented"
    assert "`dbnvar`" in d.message and "cmp" in d.message and "cell 7" in d.message
    assert "not valid Python" in d.message and "cell 10" in d.message
    fast = corpus["only_the_fast_dlogits"][0].step("dlogits").diagnoses[0].message
    assert "in one go" in fast


def test_slips_are_explained_in_words(corpus: dict[str, list[SubmissionResult]]) -> None:
    main = corpus["more_slips"][0]
    dbndiff2 = main.step("dbndiff2").diagnoses[0].message
    assert "the shape of `bnvar`" in dbndiff2 and "summed `bndiff2`" in dbndiff2
    given = corpus["gradients_not_given"][0]
    assert "graded on its own" in given.step("dcounts_sum").diagnoses[0].message
    assert "`Xtr` is not one of the names" in given.step("dC").diagnoses[0].message


def test_renamed_names_are_rewritten_to_the_exercise_s(tmp_path: Path) -> None:
    case = BY_NAME["renamed_tensors"]
    [main, fast] = load_submissions(case.write(tmp_path))
    assert main.format == "lecture"
    assert "dbndiff2 = " in main.answers["dbndiff2"] and "bndiffsq" not in main.answers["dbndiff2"]
    assert "W2.T" in main.answers["dh"] and "w2" not in main.answers["dh"]
    assert "range(n), Yb]" in main.answers["dlogprobs"]
    assert "range(n), Yb]" in fast.answers["dlogits"]
    grads = load_submission(BY_NAME["renamed_gradients"].write(tmp_path))
    assert grads.answers["dembcat"].strip() == "dembcat = dhprebn @ W1.T"


def test_an_error_line_is_the_line_of_the_learner_s_cell(tmp_path: Path) -> None:
    [main, *_] = load_submissions(BY_NAME["split_two_paths"].write(tmp_path))
    lines = main.answers["dcounts"].splitlines()
    assert lines[4].startswith("dcounts = ") and lines[6].startswith("dcounts += ")


def test_a_statement_that_is_not_python_is_skipped_alone_and_named(
    corpus: dict[str, list[SubmissionResult]],
) -> None:
    text = "a = 1\nfor i in x:\n    a += i\nelse:\n    a = 0\n@d\ndef f():\n    return (1,\n2)\n"
    tree, skipped = parse_cell(text + "b =\n# note\n\nc = 2\nif z\n    q = 1\nw = (3 +\nv = 4")
    assert [type(n).__name__ for n in tree.body] == ["Assign", "For", "FunctionDef", "Assign"]
    assert tree.body[-1].lineno == 13  # the cell's own numbering
    assert skipped == [(10, 10), (14, 15), (16, 17)]  # the unclosed bracket takes the rest
    whole, none = parse_cell(text)
    assert none == [] and len(whole.body) == 3
    dc = corpus["unfinished_last_line"][0].step("dC").diagnoses[0].message
    assert "lines that are not valid Python were skipped: cell 8 (lines 55-56, 57-59)" in dc, dc


def test_an_assignment_the_notebook_does_not_answer_says_so_in_the_lecture_s_terms(
    tmp_path: Path,
) -> None:
    path = BY_NAME["only_the_fast_dlogits"].write(tmp_path)
    for ex, why in (
        (BATCHNORM_BACKWARD, "computes `dhprebn` from `dhpreact` in one go"),
        (MANUAL_TRAINING, "answer it in the kit's manual_training.ipynb"),
    ):
        sub = load_assignment(path, ex)
        assert sub.format == "lecture" and sub.error is not None and why in sub.error, sub.error
        assert set(sub.problems) == {s.name for s in ex.steps}
        assert all("grade id" not in p for p in sub.problems.values())
    assert load_assignment(path, CROSS_ENTROPY_BACKWARD).answers["dlogits"].startswith("dlogits")


def test_kit_notebooks_and_other_notebooks_keep_their_reader(tmp_path: Path) -> None:
    kit = load_submissions(make_notebook(tmp_path / "kit.ipynb"))
    assert [s.format for s in kit] == ["kit"]
    nb = {"cells": [code("print('hello')")], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    assert read_lecture(nb, tmp_path / "other.ipynb") is None
    partial = {"cells": [code(forward().split("# BatchNorm")[0])], "nbformat": 4}
    assert read_lecture(partial, tmp_path / "partial.ipynb") is None


def test_exercise_4_s_loop_is_not_read_as_exercise_1(tmp_path: Path) -> None:
    [main, *_] = load_submissions(BY_NAME["split_two_paths"].write(tmp_path))
    assert main.answers["dh"].strip() == "dh = dlogits @ W2.T"


def test_a_lecture_notebook_with_no_exercise_1_answers_gets_26_reasons(tmp_path: Path) -> None:
    case = LectureCase("empty", "", [*setup(), code("# YOUR CODE HERE :)")], exercises=())
    [main] = load_submissions(case.write(tmp_path))
    assert main.exercise is EX1 and set(main.problems) == {s.name for s in EX1.steps}
    assert all(a == "raise NotImplementedError" for a in main.answers.values())


def test_the_two_parts_of_a_split_answer_run_together(tmp_path: Path) -> None:
    cells = [*setup(), code(exercise1(skip=["dcounts"])), code(answer("dcounts"))]
    case = LectureCase("late", "", cells)
    main = load_submission(case.write(tmp_path))
    assert main.answers["dcounts"].strip() == answer("dcounts")


def test_exercise_2_alone_is_its_own_submission(tmp_path: Path) -> None:
    case = LectureCase("ex2", "", [*setup(), *exercise2()])
    subs = load_submissions(case.write(tmp_path))
    assert [s.exercise.id for s in subs] == [BACKPROP_NINJA.id, CE]


def test_a_notebooks_results_come_together_so_a_batch_never_keeps_part_of_them(
    grader: Grader, tmp_path: Path
) -> None:
    """``grade --json`` keeps results as they come and ``--resume`` skips every notebook the
    file names: a notebook's three results must reach the file at once, never one by one."""
    three = LectureCase("three", "", [*setup(), code(exercise1()), *exercise2()]).write(tmp_path)
    kit = make_notebook(tmp_path / "kit.ipynb")
    batches = {Path(r[0].path).stem: r for r in grader.grade_notebooks([three, kit])}
    assert [r.exercise for r in batches["three"]] == [BACKPROP_NINJA.id, CE]
    assert [r.exercise for r in batches["kit"]] == [BACKPROP_NINJA.id]


def test_a_partly_answered_notebook_has_no_notebook_error_and_one_in_neither_format_does(
    grader: Grader, tmp_path: Path
) -> None:
    """A lecture notebook with blank steps is fine as a whole (each blank step says what was
    looked for); a notebook of neither format says so once, not as 26 deleted cells."""
    partly = LectureCase(
        "partly", "", [*setup(), code(exercise1(skip=["dC", "demb"]))], exercises=(EX1.id,)
    ).write(tmp_path)
    other = tmp_path / "other.ipynb"
    other.write_text(json.dumps({"cells": [code("x = 1\nprint(x)")], "metadata": {},
                                 "nbformat": 4, "nbformat_minor": 5}))  # fmt: skip
    [first] = grader.run([partly]).submissions
    assert first.error is None and first.score == len(EX1.steps) - 2
    assert [d.code for d in first.step("dC").diagnoses] == ["not-implemented"]
    [second] = grader.run([other]).submissions
    assert second.score == 0 and second.error is not None
    assert "not a notebook of the exercise" in second.error


# past the statements, or the characters of code, that any answered notebook holds: one cell of
# MAX_STATEMENTS + 1 statements; cells of one long statement each (every cell under the size
# past which a cell is skipped unread), MAX_CODE_CHARS in all and a little more
PADDING = {
    f"more than {MAX_STATEMENTS:,} statements": [";".join(["0"] * (MAX_STATEMENTS + 1))],
    f"more than {MAX_CODE_CHARS:,} characters of code": [f"s = '{'a' * 49_990}'"] * 7,
}


@pytest.mark.parametrize("reason", list(PADDING), ids=["statements", "characters"])
def test_a_notebook_with_more_code_than_the_reader_follows_is_refused_with_a_reason(
    grader: Grader, tmp_path: Path, reason: str
) -> None:
    """The reader runs in the grader's process on untrusted code, so its work is bounded: a
    lecture notebook padded past the code any answered notebook holds costs its own result
    (score 0, the reason), never minutes of the grader's time or gigabytes of memory."""
    padded = LectureCase(
        "padded",
        "",
        [*setup(), *(code(c) for c in PADDING[reason]), code(exercise1())],
        exercises=(EX1.id,),
    ).write(tmp_path)
    [result] = grader.run([padded]).submissions
    assert result.score == 0 and result.steps == []
    assert result.error is not None and reason in result.error

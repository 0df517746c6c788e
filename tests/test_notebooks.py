"""The course's notebooks: generated from the exercises, built by real nbgrader, run in real
kernels, and their checks telling the student what the grader will say.

One nbgrader build (into a temporary course) and one kernel run per notebook are shared by the
tests of this module; the corpus is checked in one kernel.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.notebooknode import NotebookNode

from autograder.core.model import lecture_graph
from autograder.course import templates
from autograder.course.build import BUGGY_ANSWERS, BuildError, build, generate, paths
from autograder.course.notebook import source_notebook
from autograder.engine.grader import Grader
from autograder.exercises import DEFAULT, EXERCISES, Exercise
from autograder.grading.results import StepResult

from .conftest import Corpora, of_exercise
from .corpus import RIGHT, WRONG

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parent.parent
KERNEL_TIMEOUT = 300
EX = DEFAULT
P = paths(EX)
Grade = Callable[[str, str], StepResult]


# --- helpers ---------------------------------------------------------------------------------


def read(path: Path) -> NotebookNode:
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell: NotebookNode) -> dict[str, Any]:
    return dict(cell.metadata.get("nbgrader", {}))


def answer_cells(nb: NotebookNode) -> list[NotebookNode]:
    return [c for c in nb.cells if nbgrader_meta(c).get("solution")]


def cell_by_id(nb: NotebookNode, cell_id: str) -> NotebookNode:
    return next(c for c in nb.cells if c.get("id") == cell_id)


def stdout(cell: NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def errors(cell: NotebookNode) -> list[dict[str, Any]]:
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def content(nb: NotebookNode) -> list[tuple[str, str, str, dict[str, Any]]]:
    """What matters in a generated notebook: per cell its type, id, source and metadata."""
    return [(c.cell_type, c.get("id", ""), c.source, dict(c.metadata)) for c in nb.cells]


def kernel_env(names_txt: Path) -> dict[str, str]:
    return {**os.environ, "BACKPROP_NINJA_NAMES": str(names_txt)}


def execute(
    nb: NotebookNode, workdir: Path, env: dict[str, str], allow_errors: bool = False
) -> tuple[NotebookNode, CellExecutionError | None]:
    """Run ``nb`` top to bottom in a python3 kernel started in ``workdir``; stop at an error
    unless ``allow_errors``."""
    client = NotebookClient(
        nb,
        timeout=KERNEL_TIMEOUT,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(workdir)}},
    )
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        return nb, exc
    return nb, None


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh ``build`` of a course holding only the repository's nbgrader_config.py:
    (course root, the folder nbgrader worked in)."""
    root = tmp_path_factory.mktemp("course")
    workdir = tmp_path_factory.mktemp("nbgrader")
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    build(root, workdir=workdir)
    return root, workdir


@pytest.fixture(scope="module")
def solution_run(
    names_txt: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[NotebookNode, Path]:
    """The committed solutions notebook, run with names.txt beside it, then one extra cell that
    saves the lecture's tensors: (executed notebook, saved tensors)."""
    workdir = tmp_path_factory.mktemp("solution-run")
    shutil.copy(names_txt, workdir / "names.txt")
    nb = read(REPO_ROOT / P["solution"])
    names = [*EX.parameters, *EX.data, *(line.var for line in EX.forward)]
    nb.cells.append(
        nbformat.v4.new_code_cell(
            f"torch.save({{k: globals()[k].detach() for k in {names!r}}}, 'state.pt')"
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "BACKPROP_NINJA_NAMES"}
    nb, error = execute(nb, workdir, env)
    assert error is None, f"the solutions notebook failed:\n{error}"
    return nb, workdir / "state.pt"


@pytest.fixture(scope="module")
def exercise_run(
    names_txt: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[NotebookNode, CellExecutionError | None]:
    """The committed exercises notebook, run with names.txt given by $BACKPROP_NINJA_NAMES."""
    workdir = tmp_path_factory.mktemp("exercise-run")
    return execute(read(REPO_ROOT / P["release"]), workdir, kernel_env(names_txt))


@pytest.fixture(scope="module")
def buggy_run(names_txt: Path, tmp_path_factory: pytest.TempPathFactory) -> NotebookNode:
    """The bundled buggy notebook, every cell run whatever the errors (as *Run All* with
    errors allowed would)."""
    workdir = tmp_path_factory.mktemp("buggy-run")
    nb, _ = execute(read(REPO_ROOT / P["buggy"]), workdir, kernel_env(names_txt), True)
    return nb


# --- the source notebooks --------------------------------------------------------------------


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_source_answer_cells_are_the_steps_in_order_each_followed_by_its_grade_cell(
    ex: Exercise,
) -> None:
    nb = read(REPO_ROOT / paths(ex)["source"])
    assert nb.metadata["backprop_ninja"] == {"exercise": ex.id}
    answers = answer_cells(nb)
    assert [nbgrader_meta(c)["grade_id"] for c in answers] == [s.name for s in ex.steps]
    for step, answer in zip(ex.steps, answers, strict=True):
        assert answer.id == step.name and answer.cell_type == "code"
        assert nbgrader_meta(answer) == {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": step.name,
            "schema_version": 3,
        }
        assert answer.source == f"### BEGIN SOLUTION\n{step.answer}\n### END SOLUTION"
        check = nb.cells[nb.cells.index(answer) + 1]
        assert check.id == step.test_id
        assert nbgrader_meta(check) == {
            "grade": True,
            "solution": False,
            "locked": True,
            "points": step.points,
            "grade_id": step.test_id,
            "schema_version": 3,
        }
        # the hidden test first, so that under stock Execute the step's points are its own
        assert check.source == (
            "### BEGIN HIDDEN TESTS\n"
            "from autograder.incell import check_step\n"
            f'check_step("{step.name}", In[-2], "{ex.id}")\n'
            "### END HIDDEN TESTS\n"
            f"CHECKS.check('{step.name}')"
        )
        before = nb.cells[: nb.cells.index(answer)]
        explanation = next(c for c in reversed(before) if c.cell_type == "markdown")
        assert explanation.cell_type == "markdown"
        assert step.text in explanation.source
        assert all(line in explanation.source for line in ex.consumer_lines(step))


def test_no_explanation_says_this_2_lines() -> None:
    text = "\n".join(c.source for c in read(REPO_ROOT / P["source"]).cells)
    assert not re.search(r"this \d+ lines", text)
    assert "through these 2 lines" in text


def test_the_forward_cell_is_the_exercises_forward_pass_then_autograd() -> None:
    source = cell_by_id(read(REPO_ROOT / P["source"]), "forward").source
    code = [line.split("#")[0].rstrip() for line in source.splitlines()]
    positions = [code.index(line.source) for line in EX.forward]
    assert positions == sorted(positions)
    retained = re.search(r"for t in \[(.*?)\]:", source, re.S)
    assert retained is not None
    kept = {t.strip() for t in retained.group(1).split(",")}
    assert kept == {line.var for line in EX.forward if line.var != "loss"}
    assert source.rstrip().endswith("loss.backward()\nloss")


def test_the_checks_cell_carries_the_kits_own_code_and_needs_only_torch() -> None:
    source = cell_by_id(read(REPO_ROOT / P["source"]), "setup_checks").source
    found = re.finditer(r"^(?:import|from) ([\w.]+)", source, re.MULTILINE)
    imports = {m.group(1).split(".")[0] for m in found}
    stdlib = {"ast", "io", "math", "collections", "tokenize", "typing", "os", "textwrap", "types"}
    stdlib |= {"re", "sys", "unicodedata"}
    assert imports - stdlib == {"torch"}
    assert "autograder" not in source
    assert "def partial_vjp(" in source and "class Checks:" in source


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_grade_ids_are_unique_and_every_code_cell_is_an_nbgrader_cell(ex: Exercise) -> None:
    nb = read(REPO_ROOT / paths(ex)["source"])
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if c.cell_type == "code"]
    assert len(ids) == len(set(ids))
    assert sum(nbgrader_meta(c).get("points", 0) for c in nb.cells) == ex.total_points


# --- exercises and solutions, as nbgrader wrote them -----------------------------------------


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_exercises_hold_stubs_that_name_their_step_and_no_solution_or_hidden_test(
    ex: Exercise,
) -> None:
    nb = read(REPO_ROOT / paths(ex)["release"])
    assert [c.source for c in answer_cells(nb)] == [
        f'# YOUR CODE HERE\nraise NotImplementedError("{s.name}: replace this line with your code")'
        for s in ex.steps
    ]
    text = "\n".join(c.source for c in nb.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "check_step", "autograder"):
        assert marker not in text
    for step in ex.steps:
        assert step.answer not in text, f"the answer of {step.name} leaked into the exercises"


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_exercises_and_solutions_keep_the_source_cells_in_order(ex: Exercise) -> None:
    source = read(REPO_ROOT / paths(ex)["source"])
    for key in ("release", "solution"):
        nb = read(REPO_ROOT / paths(ex)[key])
        assert [c.id for c in nb.cells] == [c.id for c in source.cells]
        for ours, theirs in zip(source.cells, nb.cells, strict=True):
            for field in ("grade", "solution", "locked", "grade_id", "points"):
                assert nbgrader_meta(ours).get(field) == nbgrader_meta(theirs).get(field)
        assert nb.metadata["backprop_ninja"] == {"exercise": ex.id}


def test_solutions_keep_the_answers_and_the_visible_checks_but_no_hidden_tests() -> None:
    nb = read(REPO_ROOT / P["solution"])
    for step in EX.steps:
        assert step.answer in cell_by_id(nb, step.name).source
        check = cell_by_id(nb, step.test_id).source
        assert check == f"CHECKS.check('{step.name}')"


def test_the_buggy_example_is_the_release_with_typical_slips() -> None:
    release, buggy = read(REPO_ROOT / P["release"]), read(REPO_ROOT / P["buggy"])
    slips = BUGGY_ANSWERS[EX.id]
    assert len(release.cells) == len(buggy.cells)
    for ours, theirs in zip(release.cells, buggy.cells, strict=True):
        if nbgrader_meta(ours).get("solution"):
            name = nbgrader_meta(ours)["grade_id"]
            assert theirs.source == slips.get(name, EX.step(name).answer)
        else:
            assert theirs.source == ours.source
        assert theirs.metadata == ours.metadata
    assert set(slips) == {"dC", "dcounts", "dbndiff2", "dbnmeani"}


# --- a fresh build with real nbgrader ----------------------------------------------------------


@pytest.mark.parametrize(
    ("exercise", "key"),
    [
        (e, k)
        for e in EXERCISES
        for k in ("source", "release", "solution", "buggy")
        if k != "buggy" or e in BUGGY_ANSWERS  # only Exercise 1 has a buggy example
    ],
)
def test_committed_notebooks_equal_a_fresh_build(
    exercise: str, key: str, built: tuple[Path, Path]
) -> None:
    root, _ = built
    path = paths(EXERCISES[exercise])[key]
    committed, fresh = read(REPO_ROOT / path), read(root / path)
    assert committed.metadata == fresh.metadata
    assert content(committed) == content(fresh), (
        f"{path} differs from a fresh build: run `backprop-ninja build` and commit the result"
    )


def test_nbgrader_really_loaded_the_course_config(built: tuple[Path, Path]) -> None:
    _, workdir = built
    # exercises/ and solutions/ are folder names only nbgrader_config.py gives (nbgrader's
    # defaults are release/ and source/); the assignments are filed under the config's course id.
    for ex in EXERCISES.values():
        assert (workdir / paths(ex)["release"]).is_file()
        assert (workdir / paths(ex)["solution"]).is_file()
    assert not (workdir / "release").exists()
    with sqlite3.connect(workdir / "gradebook.db") as db:
        rows = db.execute("SELECT name, course_id FROM assignment").fetchall()
    assert sorted(rows) == sorted((e, "backprop-ninja") for e in EXERCISES)


def test_a_broken_config_is_detected_although_nbgrader_only_logs_it(tmp_path: Path) -> None:
    source = P["source"]
    shutil.copytree(REPO_ROOT / source.parent, tmp_path / source.parent)
    config = (REPO_ROOT / "nbgrader_config.py").read_text()
    (tmp_path / "nbgrader_config.py").write_text(config + "\nthis line is not python\n")

    with pytest.raises(BuildError, match=r"could not load .*nbgrader_config\.py"):
        generate(tmp_path, [EX])

    # nbgrader went on with its defaults: the notebook landed in release/, not exercises/
    assert (tmp_path / "release" / EX.id / f"{EX.id}.ipynb").is_file()
    assert not (tmp_path / "exercises").exists()


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_the_generated_source_is_what_the_module_builds(ex: Exercise) -> None:
    assert content(read(REPO_ROOT / paths(ex)["source"])) == content(source_notebook(ex))


# --- the notebooks in a real kernel ----------------------------------------------------------


def test_the_solution_notebook_passes_every_check(
    solution_run: tuple[NotebookNode, Path],
) -> None:
    nb, _ = solution_run
    assert "32033 names from names.txt" in stdout(cell_by_id(nb, "setup_names"))
    for step in EX.steps:
        out = stdout(cell_by_id(nb, step.test_id))
        line = out.splitlines()[0]
        assert line.startswith(f"{step.name:15s} | exact: "), out
        assert "approximate: True" in line and line.endswith("shape: True"), out
        assert "other configurations: all passed" in out
        assert not errors(cell_by_id(nb, step.test_id))
    assert "all rows agree" in stdout(cell_by_id(nb, "test_dC"))


def test_the_notebook_builds_the_lecture_graph_of_the_package(
    solution_run: tuple[NotebookNode, Path],
) -> None:
    _, state_file = solution_run
    state = torch.load(state_file)
    graph = lecture_graph(EX)  # parameters from the seed, the batch from the package data
    for name, value in state.items():
        assert torch.equal(value, graph[name]), f"{name} differs from the package's graph"


def test_the_exercise_notebook_stops_at_the_first_stub_saying_which_step(
    exercise_run: tuple[NotebookNode, CellExecutionError | None],
) -> None:
    nb, error = exercise_run
    assert error is not None and error.ename == "NotImplementedError"
    assert "dlogprobs: replace this line with your code" in error.evalue
    failed = [c for c in nb.cells if errors(c)]
    assert [c.id for c in failed] == [EX.steps[0].name]
    first_stub = nb.cells.index(failed[0])
    assert all(
        c.execution_count is not None for c in nb.cells[:first_stub] if c.cell_type == "code"
    )
    assert "32033 names from" in stdout(cell_by_id(nb, "setup_names"))


def test_the_buggy_notebook_fails_at_each_wrong_step_and_only_there(
    buggy_run: NotebookNode,
) -> None:
    failed = {c.id: errors(c)[0] for c in buggy_run.cells if errors(c)}
    assert set(failed) == {"test_dcounts", "test_dbndiff2", "test_dbnmeani", "test_dC"}
    assert all(e["ename"] == "AssertionError" for e in failed.values())
    assert "[missing-branch]" in failed["test_dcounts"]["evalue"]
    assert "[wrong-scale]" in failed["test_dbndiff2"]["evalue"]
    assert "Bessel" in failed["test_dbndiff2"]["evalue"]
    assert "[shape-mismatch]" in failed["test_dbnmeani"]["evalue"]
    assert "[scatter-drops-duplicates]" in failed["test_dC"]["evalue"]
    # every later check judges its own step with autograd's upstream gradients, so the wrong
    # dcounts of this notebook spoils none of them
    later = cell_by_id(buggy_run, "test_dnorm_logits")
    assert "other configurations: all passed" in stdout(later) and not errors(later)
    assert "only rows used more than once disagree" in stdout(cell_by_id(buggy_run, "test_dC"))


# --- the checks against the grader, on the whole corpus ----------------------------------------


CHECK_CELL = """\
try:
    CHECKS.check({name!r})
    print("VERDICT pass")
except AssertionError as e:
    print("VERDICT fail", str(e).split("]")[0].split("[")[-1])"""


Verdicts = dict[tuple[str, str], tuple[bool, str]]


def corpus_of(ex: Exercise) -> list[tuple[str, str, bool]]:
    """(step, code, right) for every corpus answer and model answer of ``ex``."""
    from .corpus_lecture import RIGHT as LECTURE_RIGHT
    from .corpus_lecture import WRONG as LECTURE_WRONG

    if ex.id == EX.id:
        out = [(a.step, a.code, False) for a in WRONG] + [(a.step, a.code, True) for a in RIGHT]
    else:
        out = [(a.step, a.code, False) for e, a in LECTURE_WRONG if e == ex.id]
        out += [(a.step, a.code, True) for e, a in LECTURE_RIGHT if e == ex.id]
    return out + [(s.name, s.answer, True) for s in ex.steps]


def kernel_verdicts(ex: Exercise, names_txt: Path, workdir: Path) -> Verdicts:
    """Every corpus answer and model answer of ``ex`` run in one real kernel as a student would:
    the released notebook's setup, then per answer its cell and its check; a training step's
    answers after the model answers of every gradient cell. (passed, first code) each."""
    nb = read(REPO_ROOT / paths(ex)["release"])
    nb.cells = [
        c
        for c in nb.cells
        if c.cell_type == "code"
        and not nbgrader_meta(c).get("grade")
        and not nbgrader_meta(c).get("solution")
        and c.get("id") != "train_and_sample"
    ]
    client = NotebookClient(
        nb,
        timeout=KERNEL_TIMEOUT,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    verdicts: Verdicts = {}

    def run(source: str) -> NotebookNode:
        nb.cells.append(nbformat.v4.new_code_cell(source))
        client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
        return nb.cells[-1]

    with client.setup_kernel(env=kernel_env(names_txt)):
        for index, cell in enumerate(list(nb.cells)):
            if cell.get("id", "").startswith("before_"):
                continue  # run right before the training step's answers, below
            client.execute_cell(cell, index)
        answers = corpus_of(ex)
        answers.sort(key=lambda a: ex.step(a[0]).kind == "training")
        ready = False
        for name, code, _ in answers:
            step = ex.step(name)
            if step.kind == "training" and not ready:
                for s in ex.steps:
                    if s.kind == "gradient":
                        run(s.answer)
                run(templates.before_training(ex))
                ready = True
            run(code)
            out = stdout(run(CHECK_CELL.format(name=name)))
            found = re.search(r"VERDICT (pass|fail) ?(\S*)", out)
            assert found is not None, out
            verdicts[(name, code)] = (found.group(1) == "pass", found.group(2))
    return verdicts


@pytest.mark.parametrize("ex", EXERCISES.values(), ids=list(EXERCISES))
def test_the_notebooks_checks_agree_with_the_grader_on_the_corpus(
    ex: Exercise,
    names_txt: Path,
    grader: Grader,
    graded_corpora: Corpora,
    tmp_path: Path,
) -> None:
    verdicts = kernel_verdicts(ex, names_txt, tmp_path)
    answers = corpus_of(ex)
    # the corpora are graded once for the run; the model answers here
    by_key = of_exercise(graded_corpora, ex.id)
    todo = [(name, code) for name, code, _ in answers if (name, code) not in by_key]
    graded = grader.grade_codes([(ex, ex.step(name), code) for name, code in todo])
    by_key.update(zip(todo, graded, strict=True))
    right = [(name, code) for name, code, ok in answers if ok]
    assert all(verdicts[key][0] for key in right), [key for key in right if not verdicts[key][0]]
    wrong = [(name, code) for name, code, ok in answers if not ok]
    caught = sum(not verdicts[key][0] for key in wrong)
    assert caught >= 0.9 * len(wrong), f"the checks catch {caught} of {len(wrong)} bugs"
    same = [key for key in verdicts if verdicts[key][0] == by_key[key].passed]
    agreement = len(same) / len(verdicts)
    assert agreement >= 0.95, f"the notebook agrees with the grader on {agreement:.1%}"
    codes = [
        key
        for key in wrong
        if not by_key[key].passed and verdicts[key][1] == by_key[key].diagnoses[0].code
    ]
    print(
        f"{ex.id}: {caught}/{len(wrong)} bugs caught in the notebook, verdicts agree on "
        f"{len(same)}/{len(verdicts)} answers, the same first diagnosis on "
        f"{len(codes)}/{len(wrong)} bugs"
    )


def test_the_update_the_notebook_checks_is_the_cell_that_updates_whatever_it_names() -> None:
    from autograder.course.checks import Checks, exercise_spec

    ex = EXERCISES["manual_training"]
    model = ex.step("update").answer
    by_name = "\n".join(f"{p}.data -= lr * d{p}" for p in ex.parameters)
    for update, after in ((by_name, "print(loss)"), (model, "x = 1")):
        history = [
            'raise NotImplementedError("update: replace this line with your code")',
            model,  # an earlier run of another update: not the one checked
            *(s.answer for s in ex.steps if s.kind == "gradient"),
            update,
            after,  # a scratch cell run between the update and its check names no lr
            "CHECKS.check('update')",
        ]
        code = Checks(exercise_spec(ex), {"In": history}).answer_code("update")
        assert code is not None and update in code, update

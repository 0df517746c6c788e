"""The course's notebooks: generated from the catalog, built by real nbgrader, run in real kernels.

One nbgrader build (into a temporary course) and one kernel run per notebook are shared by the
tests of this module.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import nbformat
import pytest
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat.notebooknode import NotebookNode

from autograder import authoring
from autograder.authoring import (
    ASSIGNMENT,
    BUGGY,
    BUGGY_ANSWERS,
    CMP,
    NOTEBOOK,
    RELEASE,
    SOLUTION,
    SOURCE,
    BuildError,
    build,
    generate,
)
from autograder.catalog import FORWARD, PARAMETERS, STEPS
from autograder.model import lecture_graph
from autograder.solutions import SOLUTIONS

REPO_ROOT = Path(__file__).resolve().parent.parent
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
KERNEL_TIMEOUT = 180


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


def content(nb: NotebookNode) -> list[tuple[str, str, str, dict[str, Any]]]:
    """What matters in a generated notebook: per cell its type, id, source and metadata."""
    return [(c.cell_type, c.get("id", ""), c.source, dict(c.metadata)) for c in nb.cells]


def execute(
    nb: NotebookNode, workdir: Path, env: dict[str, str]
) -> tuple[NotebookNode, CellExecutionError | None]:
    """Run ``nb`` top to bottom in a python3 kernel started in ``workdir``; stop at an error."""
    client = NotebookClient(
        nb,
        timeout=KERNEL_TIMEOUT,
        kernel_name="python3",
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
    nb = read(REPO_ROOT / SOLUTION)
    names = [*PARAMETERS, "Xb", "Yb", *(var for var, _ in FORWARD)]
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
    env = {**os.environ, "BACKPROP_NINJA_NAMES": str(names_txt)}
    return execute(read(REPO_ROOT / RELEASE), workdir, env)


# --- the source notebook ---------------------------------------------------------------------


def test_source_answer_cells_are_the_steps_in_catalog_order_each_followed_by_its_grade_cell() -> (
    None
):
    nb = read(REPO_ROOT / SOURCE)
    answers = answer_cells(nb)
    assert [nbgrader_meta(c)["grade_id"] for c in answers] == [s.name for s in STEPS]

    for step, answer in zip(STEPS, answers, strict=True):
        assert answer.id == step.name and answer.cell_type == "code"
        assert nbgrader_meta(answer) == {
            "grade": False,
            "solution": True,
            "locked": False,
            "grade_id": step.name,
            "schema_version": 3,
        }
        assert answer.source == f"### BEGIN SOLUTION\n{SOLUTIONS[step.name]}\n### END SOLUTION"

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
        # the hidden test first, so that under stock Execute a NameError in the visible check
        # (an earlier step left unanswered) cannot zero a step whose own answer is right
        assert check.source.startswith(
            "### BEGIN HIDDEN TESTS\n"
            "from autograder.incell import check_step\n"
            f'check_step("{step.name}", In[-2])\n'
            f'globals().setdefault("{step.name}", None)\n'
            "### END HIDDEN TESTS\n"
            f"cmp('{step.name}', {step.name}, {step.var})"
        )

        explanation = nb.cells[nb.cells.index(answer) - 1]
        assert explanation.cell_type == "markdown"
        assert step.text in explanation.source
        assert all(line in explanation.source for line in step.consumer_lines)


def test_the_forward_cell_is_the_catalogs_forward_pass_then_autograd() -> None:
    source = cell_by_id(read(REPO_ROOT / SOURCE), "forward").source
    code = [line.split("#")[0].rstrip() for line in source.splitlines()]
    positions = [code.index(line) for _, line in FORWARD]
    assert positions == sorted(positions)
    retained = re.search(r"for t in \[(.*?)\]:", source, re.S)
    assert retained is not None
    assert {t.strip() for t in retained.group(1).split(",")} == {s.var for s in STEPS}
    assert source.rstrip().endswith("loss.backward()\nloss")


def test_grade_ids_are_unique_and_every_code_cell_is_an_nbgrader_cell() -> None:
    nb = read(REPO_ROOT / SOURCE)
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if c.cell_type == "code"]
    assert len(ids) == len(set(ids))
    assert sum(nbgrader_meta(c).get("points", 0) for c in nb.cells) == sum(s.points for s in STEPS)


# --- exercises and solutions, as nbgrader wrote them -----------------------------------------


def test_exercises_hold_stubs_and_neither_solutions_nor_hidden_tests() -> None:
    nb = read(REPO_ROOT / RELEASE)
    assert [c.source for c in answer_cells(nb)] == [STUB] * len(STEPS)
    text = "\n".join(c.source for c in nb.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "check_step", "autograder"):
        assert marker not in text
    for name, solution in SOLUTIONS.items():
        assert solution not in text, f"the solution of {name} leaked into the exercises"


def test_exercises_and_solutions_keep_the_source_cells_in_order() -> None:
    source = read(REPO_ROOT / SOURCE)
    for path in (RELEASE, SOLUTION):
        nb = read(REPO_ROOT / path)
        assert [c.id for c in nb.cells] == [c.id for c in source.cells]
        for ours, theirs in zip(source.cells, nb.cells, strict=True):
            for key in ("grade", "solution", "locked", "grade_id", "points"):
                assert nbgrader_meta(ours).get(key) == nbgrader_meta(theirs).get(key)


def test_solutions_keep_the_answers_and_the_visible_checks_but_no_hidden_tests() -> None:
    nb = read(REPO_ROOT / SOLUTION)
    for step in STEPS:
        assert SOLUTIONS[step.name] in cell_by_id(nb, step.name).source
        check = cell_by_id(nb, step.test_id).source
        assert check.startswith(f"cmp('{step.name}', {step.name}, {step.var})")
        assert "HIDDEN TESTS" not in check and "check_step" not in check


def test_the_buggy_example_is_the_release_with_typical_slips() -> None:
    release, buggy = read(REPO_ROOT / RELEASE), read(REPO_ROOT / BUGGY)
    assert len(release.cells) == len(buggy.cells)
    for ours, theirs in zip(release.cells, buggy.cells, strict=True):
        if nbgrader_meta(ours).get("solution"):
            name = nbgrader_meta(ours)["grade_id"]
            assert theirs.source == BUGGY_ANSWERS.get(name, SOLUTIONS[name])
        else:
            assert theirs.source == ours.source
        assert theirs.metadata == ours.metadata
    assert set(BUGGY_ANSWERS) == {"dC", "dcounts", "dbndiff2", "dbnmeani"}


# --- a fresh build with real nbgrader ----------------------------------------------------------


@pytest.mark.parametrize("path", [SOURCE, RELEASE, SOLUTION, BUGGY], ids=str)
def test_committed_notebooks_equal_a_fresh_build(path: Path, built: tuple[Path, Path]) -> None:
    root, _ = built
    committed, fresh = read(REPO_ROOT / path), read(root / path)
    assert committed.metadata == fresh.metadata
    assert content(committed) == content(fresh), (
        f"{path} differs from a fresh build: run `backprop-ninja build` and commit the result"
    )


def test_nbgrader_really_loaded_the_course_config(built: tuple[Path, Path]) -> None:
    _, workdir = built
    # exercises/ and solutions/ are folder names only nbgrader_config.py gives (nbgrader's
    # defaults are release/ and source/); the assignment is filed under the config's course id.
    assert (workdir / "exercises" / ASSIGNMENT / NOTEBOOK).is_file()
    assert (workdir / "solutions" / ASSIGNMENT / NOTEBOOK).is_file()
    assert not (workdir / "release").exists()
    with sqlite3.connect(workdir / "gradebook.db") as db:
        rows = db.execute("SELECT name, course_id FROM assignment").fetchall()
    assert rows == [(ASSIGNMENT, "backprop-ninja")]


def test_a_broken_config_is_detected_although_nbgrader_only_logs_it(tmp_path: Path) -> None:
    shutil.copytree(REPO_ROOT / SOURCE.parent, tmp_path / SOURCE.parent)
    config = (REPO_ROOT / "nbgrader_config.py").read_text()
    (tmp_path / "nbgrader_config.py").write_text(config + "\nthis line is not python\n")

    with pytest.raises(BuildError, match=r"could not load .*nbgrader_config\.py"):
        generate(tmp_path)

    # nbgrader went on with its defaults: the notebook landed in release/, not exercises/
    assert (tmp_path / "release" / ASSIGNMENT / NOTEBOOK).is_file()
    assert not (tmp_path / "exercises").exists()


# --- the notebooks in a real kernel ----------------------------------------------------------


def test_the_solution_notebook_passes_all_26_visible_checks(
    solution_run: tuple[NotebookNode, Path],
) -> None:
    nb, _ = solution_run
    assert "32033 names from names.txt" in stdout(cell_by_id(nb, "setup_names"))
    for step in STEPS:
        out = stdout(cell_by_id(nb, step.test_id))
        line = out.splitlines()[0]
        assert line.startswith(f"{step.name:15s} | exact: "), out
        assert "approximate: True" in line and line.endswith("shape: True"), out
    assert "all rows agree" in stdout(cell_by_id(nb, "test_dC"))


def test_the_notebook_builds_the_lecture_graph_of_the_package(
    solution_run: tuple[NotebookNode, Path],
) -> None:
    _, state_file = solution_run
    state = torch.load(state_file)
    graph = lecture_graph()  # parameters from the seed, the batch from data/lecture_batch.json
    for name, value in state.items():
        assert torch.equal(value, graph[name]), f"{name} differs from autograder.model"


def test_the_exercise_notebook_runs_until_the_first_stub(
    exercise_run: tuple[NotebookNode, CellExecutionError | None],
) -> None:
    nb, error = exercise_run
    assert error is not None and error.ename == "NotImplementedError"
    failed = [c for c in nb.cells if any(o.output_type == "error" for o in c.get("outputs", []))]
    assert [c.id for c in failed] == [STEPS[0].name]
    first_stub = nb.cells.index(failed[0])
    assert all(
        c.execution_count is not None for c in nb.cells[:first_stub] if c.cell_type == "code"
    )
    assert "32033 names from" in stdout(cell_by_id(nb, "setup_names"))


# --- the visible check, outside a kernel ------------------------------------------------------


@pytest.fixture
def checks() -> dict[str, Any]:
    """The notebook's ``cmp`` and ``cmp_rows``, defined from the cell's source."""
    namespace: dict[str, Any] = {"torch": torch}
    exec(CMP, namespace)
    return namespace


def _with_grad(value: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    t = value.clone().requires_grad_()
    t.grad = grad
    return t


def test_cmp_compares_shapes_strictly_without_broadcasting(
    checks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    t = _with_grad(torch.zeros(1, 4), torch.ones(1, 4))
    checks["cmp"]("dbnmeani", torch.ones(4), t)  # broadcasting would call these equal
    out = capsys.readouterr().out
    assert "shape: False" in out and "expected (1, 4), got (4,)" in out
    assert "approximate" not in out


def test_cmp_reports_a_non_tensor_and_another_dtype_without_raising(
    checks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    t = _with_grad(torch.zeros(2, 3), torch.ones(2, 3))
    checks["cmp"]("dW2", None, t)
    checks["cmp"]("dW2", torch.ones(2, 3, dtype=torch.float64), t)
    first, second = capsys.readouterr().out.splitlines()
    assert "not a tensor: got NoneType" in first
    assert "approximate: True" in second and "dtype: torch.float64" in second


def test_cmp_rows_names_the_scatter_bug_on_exactly_the_repeated_rows(
    checks: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    g = torch.Generator().manual_seed(0)
    C = torch.randn(6, 3, generator=g, requires_grad=True)
    Xb = torch.tensor([[0, 1], [1, 2], [3, 1], [4, 0]])  # rows 0 and 1 repeat, row 5 is unused
    demb = torch.randn(4, 2, 3, generator=g)
    C[Xb].backward(demb)

    scattered = torch.zeros(6, 3)
    scattered[Xb] += demb  # the silent bug: one update per row
    accumulated = torch.zeros(6, 3).index_add_(0, Xb.flatten(), demb.view(-1, 3))

    checks["cmp_rows"](accumulated, C, Xb)
    checks["cmp_rows"](scattered, C, Xb)
    right, wrong, hint = capsys.readouterr().out.splitlines()
    assert "used more than once: 2" in right and "all rows agree" in right
    assert "disagree: 2" in wrong and "exactly the repeated rows disagree" in wrong
    assert "accumulate" in hint


def test_the_generated_source_is_what_the_module_builds() -> None:
    assert content(read(REPO_ROOT / SOURCE)) == content(authoring.source_notebook())

"""pytest entry: ``pytest -c /dev/null --pyargs autograder --submission PATH`` grades a notebook.

The hidden suite (:mod:`autograder.test_submission`) has one test per step of the notebook's
exercise, ``test_step[dC]`` and so on, each failing with the step's diagnosis. The plugin is
registered through the ``pytest11`` entry point, so the options exist wherever the kit is
installed.

pytest runs in the grader's process whatever settings it finds: a ``pytest.ini`` (or
``pyproject.toml``, ``tox.ini``, ``setup.cfg``) in the folder it starts from, which in a course's
CI is the student's checkout, can add that folder to ``sys.path`` and load a plugin from it that
passes every test. So grading refuses to start when pytest found such settings on its own; the
documented command, ``pytest -c /dev/null ...``, reads none. (Code loaded before this plugin
could undo the check: the check makes the unsafe command fail before anyone abuses it, and
``-c /dev/null`` is what makes it safe.) A ``conftest.py`` in a folder above the kit (the
student's checkout, where a CI job installs the kit into a virtual environment inside it) would
be loaded whatever the settings: grading loads none (``--noconftest``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .grading.results import SubmissionResult


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("backprop-ninja")
    group.addoption(
        "--submission",
        type=Path,
        metavar="PATH",
        help="notebook graded by the backprop-ninja hidden suite",
    )
    group.addoption(
        "--bn-seed",
        type=int,
        metavar="N",
        dest="bn_seed",
        help="seed of the hidden configurations (default: drawn and reported)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """With ``--submission``, no ``conftest.py`` is loaded (see the module docstring): set
    before pytest looks for the first ones, and it never looks again."""
    if getattr(early_config.known_args_namespace, "submission", None) is not None:
        early_config.known_args_namespace.noconftest = True


SAFE_COMMAND = "pytest -c /dev/null -p no:cacheprovider --pyargs autograder --submission PATH"
"""How a course's CI grades a notebook: no pytest settings read, nothing written beside it."""


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to grade with pytest settings found in the folder pytest started from (see the
    module docstring); a file named with ``-c`` is the grader's own choice."""
    found = config.inipath
    if config.getoption("submission") is None or found is None or config.option.inifilename:
        return
    if found.name == "pyproject.toml" and not _has_pytest_table(found):
        return  # only marks the root folder: no settings
    raise pytest.UsageError(
        f"pytest read its settings from {found}; settings in a submission's folder can load "
        "code into the process that grades it, so none are used for grading: run "
        f"`{SAFE_COMMAND}` (outside the student's checkout, never `python -m pytest` there)"
    )


def _has_pytest_table(pyproject: Path) -> bool:
    """Whether ``pyproject`` holds pytest settings (unreadable, or Python 3.10 without
    ``tomllib``: whether it mentions pytest at all)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return True
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return "pytest" in text
    try:
        tool = tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError:
        return True
    return not isinstance(tool, dict) or "pytest" in tool


_graded: dict[Path, tuple[int, SubmissionResult]] = {}


def graded(config: pytest.Config) -> tuple[int, SubmissionResult]:
    """Grade ``--submission`` once per session; returns (seed, result)."""
    path = config.getoption("submission")
    if path is None:
        raise pytest.UsageError("the backprop-ninja suite needs --submission PATH (a notebook)")
    if path not in _graded:
        from .engine.grader import Grader

        grader = Grader(seed=config.getoption("bn_seed"))
        try:
            run = grader.run([path])
        finally:
            grader.close()
        _graded[path] = (grader.seed, run.submissions[0])
    return _graded[path]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``test_step`` of the hidden suite: one test per step of the submission's exercise."""
    if "step" not in metafunc.fixturenames or metafunc.module.__name__ != (
        "autograder.test_submission"
    ):
        return
    from .exercises import DEFAULT, EXERCISES

    ex = DEFAULT
    if metafunc.config.getoption("submission") is not None:
        ex = EXERCISES.get(graded(metafunc.config)[1].exercise, DEFAULT)
    metafunc.parametrize("step", [s.name for s in ex.steps])


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getoption("submission") is None:
        return None
    seed, sub = graded(config)
    return (
        f"backprop-ninja: {sub.path} ({sub.exercise}), seed {seed} (replay with --bn-seed {seed})"
    )


@pytest.fixture(scope="session")
def submission_result(pytestconfig: pytest.Config) -> SubmissionResult:
    """The graded ``--submission``."""
    return graded(pytestconfig)[1]

"""An interrupted ``backprop-ninja grade --json`` (Ctrl-C, and SIGKILL), resumed: every notebook
graded exactly once, results kept as they were, never a partial file, no process or runner copy
left; as root and as ``nobody`` (see :mod:`tests.unprivileged`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autograder.exercises import DEFAULT as EX
from autograder.grading.results import RunResult, run_from_json

from .notebooks import make_notebook
from .unprivileged import (
    NOBODY,
    REPO_ROOT,
    child_env,
    cleanup,
    popen_cli,
    remove_shared,
    require_unprivileged,
    shared_folder,
)

pytestmark = pytest.mark.slow

SOLUTION = {s.name: s.answer for s in EX.steps}


COUNT = 24
"""Notebooks in the interrupted batch: six seconds of sleeping for two sandboxes."""


def _slow(i: int) -> dict[str, str]:
    """0.25 s a notebook (five cases), and an answer of its own (identical answers are graded
    once): the batch is still running at its first flush, after 2 s."""
    return {"dlogprobs": f"nb = {i}\nimport time\ntime.sleep(0.05)\n" + SOLUTION["dlogprobs"]}


def _interruptible() -> None:
    """In the child, before exec: Ctrl-C as in a terminal. A shell that runs the suite in the
    background (``pytest &``) starts it with SIGINT ignored, which every child inherits and
    Python then leaves alone."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _grade_cli(
    user: str, args: list[str], env: dict[str, str]
) -> tuple[subprocess.Popen[str], list[str]]:
    if user == "nobody":
        return popen_cli(args, env=env, start_new_session=True, preexec_fn=_interruptible)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(REPO_ROOT),
        start_new_session=True,
        preexec_fn=_interruptible,
    )
    return proc, []


VARIANTS = [("SIGINT", "nobody"), ("SIGKILL", "root" if os.geteuid() == 0 else "nobody")]
"""Each way of stopping and each user once: Ctrl-C at an instructor's terminal (an ordinary
user), SIGKILL from a CI job's timeout (CI runs as root here; without root, as the one user
there is)."""


@pytest.mark.parametrize(("how", "user"), VARIANTS)
def test_an_interrupted_json_batch_resumes_with_every_notebook_exactly_once(
    names_txt: Path, how: str, user: str
) -> None:
    if user == "nobody":
        require_unprivileged()
    base = shared_folder()
    try:
        folder = base / "class"
        for i in range(COUNT):
            make_notebook(folder / f"student{i:02}.ipynb", _slow(i))
        folder.chmod(0o755)
        out = base / "results.json"
        args = ["grade", str(folder), "--json", str(out), "--jobs", "2", "--quiet"]
        scratch = base / "tmp"  # the graders' temporary folder: what is left there is theirs
        scratch.mkdir(mode=0o755)
        if os.geteuid() == 0 and user == "nobody":
            os.chown(scratch, NOBODY, NOBODY)
        env = child_env(BACKPROP_NINJA_NAMES=str(names_txt), TMPDIR=str(scratch))

        proc, stashes = _grade_cli(user, args, env)
        try:
            deadline = time.monotonic() + 300
            while not out.exists():  # the first flush
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "no flush in 5 minutes"
                time.sleep(0.01)
            tree = psutil.Process(proc.pid).children(recursive=True)
            if how == "SIGINT":  # Ctrl-C: the whole foreground process group
                os.killpg(proc.pid, signal.SIGINT)
            else:
                proc.kill()
            _, stderr = proc.communicate(timeout=120)
        finally:
            with contextlib.suppress(OSError):
                proc.kill()
            cleanup(stashes)
        assert proc.returncode == (130 if how == "SIGINT" else -9), stderr
        _, alive = psutil.wait_procs(tree, timeout=60)
        assert alive == [], "a process of the interrupted grader survived it"

        partial = json.loads(out.read_text())  # never a partial file
        graded = [s["path"] for s in partial["submissions"]]
        assert 0 < len(graded) < COUNT
        leftovers = list(base.glob(".results.json.*.tmp"))
        # Ctrl-C removes the temporary file; SIGKILL in the middle of a write can orphan one.
        assert len(leftovers) == 0 if how == "SIGINT" else len(leftovers) <= 1

        resumed, stashes = _grade_cli(user, [*args, "--resume"], env)
        try:
            _, stderr = resumed.communicate(timeout=600)
        finally:
            cleanup(stashes)
        assert resumed.returncode == 0, stderr
        assert f"resuming: {len(graded)} already graded, {COUNT - len(graded)} to go" in stderr
        final = json.loads(out.read_text())
        paths = [s["path"] for s in final["submissions"]]
        assert sorted(paths) == sorted(str(p) for p in folder.glob("*.ipynb"))  # each once
        assert final["seed"] == partial["seed"]
        kept = {s["path"]: s for s in final["submissions"]}
        assert [kept[p] for p in graded] == partial["submissions"]  # kept as they were
        assert all(s["score"] == 26 for s in final["submissions"])
        assert isinstance(run_from_json(final), RunResult)  # and it reads back
        assert os.listdir(scratch) == []  # the killed grader's copy of the runner went too
    finally:
        remove_shared(base)

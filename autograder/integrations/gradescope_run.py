"""What Gradescope's ``run_autograder`` runs for one submission: find the notebook, grade it, write
``/autograder/results/results.json``; whatever the submission is, that file is written.

Two processes. The **parent** runs as root (Gradescope runs ``run_autograder`` as root): it
reads the bundle's settings, picks the notebook in ``/autograder/submission``, copies it into a
scratch folder, starts a child, reads back what the child wrote, and writes the results file.
It never runs, imports or parses the student's code; it only reads back a file of results.

The **child** is the kit's grader, started with an empty environment: it reads the notebook,
works out the exercise, and grades it with :class:`~autograder.engine.grader.Grader` in its
sandboxes. Which child, per the bundle's sandbox policy (:class:`Settings`, :func:`attempts`):

- ``fallback`` (the default): a child as the unprivileged user (``nobody``) with a sandbox (user
  namespaces, else bubblewrap); if it finds none, a child as root with a sandbox (where only
  root may create namespaces; the sandbox drops to ``nobody`` inside); if neither finds one
  (Gradescope's container may refuse namespaces to everyone, as Docker's default seccomp profile
  does), a child as the unprivileged user whose answers run with ``--sandbox none``: still in
  processes of their own, with time, memory and output limits and the kit's seccomp filter, but
  not confined. That last resort is documented and logged; it is acceptable because Gradescope's
  container is itself per submission and disposable: such an answer can read what ``nobody`` may
  read and disturb its own grading (it runs as the grader's user), but it cannot write the
  results file, the kit or the image, which belong to root, nor reach another submission;
- ``required``: the two confined children only; no sandbox, no grading (score 0, and the reason
  in the log for the instructor);
- ``none``: only the unconfined child as the unprivileged user.

A submission that cannot be graded (no notebook, several, an unreadable file, another exercise's
notebook) gets score 0 and the reason in words; a failure of the grader itself gets score 0, a
sentence for the student and the traceback in the log (``/autograder/results/stdout``, which
students do not see: ``stdout_visibility`` is ``hidden``).

Why one module of this length: ``run_autograder`` executes this file as a script, in both roles,
so each role's code and the contract between them stay in one file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..exercises import EXERCISES
from ..grading.loading import WrongExercise, load_assignment, load_submissions
from ..grading.results import RunResult, run_from_json, write_json
from ..grading.submission import (
    MAX_NOTEBOOK_BYTES,
    Submission,
    SubmissionError,
)
from .gradescope import failure_json, gradescope_json

SETTINGS_FILE = "backprop-ninja.json"
"""The bundle's settings, in ``/autograder/source``."""

UNPRIVILEGED = 65534
"""The uid and gid the grader runs as when started as root (``nobody`` and ``nogroup``)."""

STARTUP_SECONDS = 240.0
"""Beyond the notebook's budget, how long the child may take (starting sandboxes, torch)."""

GRADER_FAILED = (
    "The autograder failed while grading this submission, so it was not graded. It is not "
    "your fault: your instructor sees why in the autograder output and can regrade it."
)


@dataclass(frozen=True)
class Settings:
    """How the bundle grades, fixed when it is built (``gradescope-autograder`` options).

    Attributes:
        assignment: the exercise every submission is graded as; None: each notebook's own
            (its metadata, else its grade ids).
        seed: the hidden configurations' seed, the same for every submission (a regrade
            replays it).
        visibility: when students see the tests (Gradescope's ``visibility``).
        sandbox: ``fallback``, ``required`` or ``none`` (see the module docstring).
        step_seconds, budget_seconds: the time limits per answer and per notebook.
        version: the kit's version that built the bundle.
    """

    assignment: str | None = None
    seed: int = 0
    visibility: str = "visible"
    sandbox: str = "fallback"
    step_seconds: float = 10.0
    budget_seconds: float = 60.0
    version: str = ""

    def to_text(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_text(cls, text: str) -> Settings:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("the settings are not a JSON object")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        settings = cls(**known)
        if settings.sandbox not in ("fallback", "required", "none"):
            raise ValueError(f"unknown sandbox policy {settings.sandbox!r}")
        if settings.assignment is not None and settings.assignment not in EXERCISES:
            raise ValueError(f"unknown assignment {settings.assignment!r}")
        return settings


# --- the parent: root, never touches the student's code -----------------------------------------


def find_submission(folder: Path, assignment: str | None) -> Path | str:
    """The notebook to grade in ``folder``, or why there is none, in the student's words.

    One ``.ipynb`` (Jupyter's checkpoints and macOS's zip debris aside: ``__MACOSX/`` and the
    ``._*`` files beside each file) is it; of several, the one named after the assignment;
    otherwise the student is told to submit one. A notebook too large to be one is refused here,
    before root copies it.
    """
    if not folder.is_dir():
        return "No files were submitted. Upload your notebook (the .ipynb file)."
    skipped = (".ipynb_checkpoints", "__MACOSX")
    inside = folder.resolve()
    found = sorted(
        p
        for p in folder.rglob("*.ipynb")
        if p.is_file()
        and not p.is_symlink()  # root copies the file: never one a link points it to
        and p.resolve().is_relative_to(inside)
        and not any(part in skipped for part in p.relative_to(folder).parts)
        and not p.name.startswith("._")  # macOS's AppleDouble file of the real one
    )
    expected = f"{assignment}.ipynb" if assignment else None
    if len(found) == 1 or (expected and [p.name for p in found].count(expected) == 1):
        chosen = found[0] if len(found) == 1 else next(p for p in found if p.name == expected)
        size = chosen.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            return (
                f"Your notebook {chosen.relative_to(folder).as_posix()} is {size} bytes, too "
                "large to be this notebook: submit the notebook saved from Jupyter."
            )
        return chosen
    names = ", ".join(p.relative_to(folder).as_posix() for p in found[:10])
    if found:
        want = f" ({expected})" if expected else ""
        return (
            f"Your submission holds {len(found)} notebooks ({names}); submit only the "
            f"notebook of this assignment{want}."
        )
    others = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    seen = f" (your submission holds: {', '.join(others[:10])})" if others else ""
    return (
        f"No Jupyter notebook (.ipynb file) was found in your submission{seen}. Upload the "
        "notebook itself."
    )


def _child_env(home: Path) -> dict[str, str]:
    """An environment of the child's own: nothing of root's (tokens, paths) reaches it."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home),
    }


def _demote(unprivileged: bool) -> dict[str, Any]:
    """``subprocess`` arguments that start the child as the unprivileged user (when root)."""
    if not unprivileged or os.geteuid() != 0:
        return {}
    return {"user": UNPRIVILEGED, "group": UNPRIVILEGED, "extra_groups": []}


Attempt = tuple[str, bool]
"""How one child grades: ``("confined", ...)`` (a sandbox, or none at all) or ``("none", ...)``
(answers unconfined), and whether it runs as the unprivileged user."""


def attempts(policy: str, root: bool) -> list[Attempt]:
    """The children to try, in order, until one grades: confined as the unprivileged user; as
    root if that is refused (a kernel may allow user namespaces to root only; the sandbox drops
    to ``nobody`` inside); then, unless the policy requires a sandbox, unconfined as the
    unprivileged user (``fallback``'s last resort, ``none``'s only way)."""
    if policy == "none":
        return [("none", True)]
    tries = [("confined", True)] + ([("confined", False)] if root else [])
    return [*tries, ("none", True)] if policy == "fallback" else tries


def run_child(notebook: Path, settings: Settings, attempt: Attempt) -> dict[str, Any]:
    """Grade ``notebook`` in a child process as ``attempt`` says; return what it wrote, or
    ``{"failure": ...}`` when it wrote nothing readable."""
    mode, unprivileged = attempt
    work = Path(tempfile.mkdtemp(prefix="backprop-ninja-gradescope-"))
    try:
        copy = work / notebook.name
        shutil.copyfile(notebook, copy, follow_symlinks=False)
        out = work / "out"
        out.mkdir()
        if unprivileged and os.geteuid() == 0:
            for path in (work, copy, out):
                os.chown(path, UNPRIVILEGED, UNPRIVILEGED)
        os.chmod(work, 0o700)
        command = [sys.executable, "-I", "-m", "autograder.integrations.gradescope_run"]
        # --grade=NAME: a file name starting with "-" is still a value, not an option
        command += [f"--grade={copy.name}", "--out", str(out / "graded.json"), "--mode", mode]
        command += ["--settings-json", settings.to_text()]
        timeout = settings.budget_seconds + STARTUP_SECONDS
        try:
            proc = subprocess.run(
                command,
                cwd=work,
                env=_child_env(work),
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
                **_demote(unprivileged),
            )
        except subprocess.TimeoutExpired:
            return {"failure": f"the grader did not finish in {timeout:g} s"}
        if proc.returncode != 0:
            return {"failure": f"the grader exited with status {proc.returncode}"}
        try:
            data = json.loads((out / "graded.json").read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except (OSError, ValueError) as e:
            return {"failure": f"the grader's output cannot be read ({e})"}
        return data
    finally:
        shutil.rmtree(work, ignore_errors=True)


NO_SANDBOX = (
    "This submission was not graded: the autograder runs answers only in a sandbox, and none "
    "can be set up here. It is not your fault: your instructor sees why in the autograder "
    "output."
)


def grade_in_child(notebook: Path, settings: Settings) -> dict[str, Any]:
    """Grade ``notebook`` in children per :func:`attempts` until one grades (or refuses the
    notebook); ``{"refused": ...}`` when every sandbox is refused and the policy needs one."""
    reasons: list[str] = []
    for attempt in attempts(settings.sandbox, os.geteuid() == 0):
        data = run_child(notebook, settings, attempt)
        if "no-sandbox" not in data:
            if attempt[0] == "none" and settings.sandbox == "fallback":
                data["why"] = "the last resort of --sandbox fallback: " + "; ".join(reasons)
            return data
        who = "the unprivileged user" if attempt[1] else "root"
        reasons.append(f"as {who}: {data['no-sandbox']}")
        print(f"no sandbox {reasons[-1]}")
    return {"refused": NO_SANDBOX, "confinement": "none available", "why": "; ".join(reasons)}


def results_for(root: Path, settings: Settings) -> dict[str, Any]:
    """Gradescope's results for the submission in ``root/submission`` (see the module doc)."""
    found = find_submission(root / "submission", settings.assignment)
    if isinstance(found, str):
        print(f"no notebook to grade: {found}")
        return failure_json(found, settings.visibility)
    print(f"grading {found.relative_to(root)} ({found.stat().st_size} bytes)")
    data = grade_in_child(found, settings)
    print(f"confinement: {data.get('confinement', '?')} ({data.get('why', 'no reason given')})")
    if "refused" in data:
        return failure_json(data["refused"], settings.visibility)
    if "failure" in data:
        print(f"grading failed: {data['failure']}")
        return failure_json(GRADER_FAILED, settings.visibility)
    try:
        run = run_from_json(data["run"])
        (sub,) = run.submissions
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        print(f"grading failed: the grader's results cannot be read ({e!r})")
        return failure_json(GRADER_FAILED, settings.visibility)
    if sub.exercise not in EXERCISES:
        print(f"grading failed: unknown exercise {sub.exercise!r} in the grader's results")
        return failure_json(GRADER_FAILED, settings.visibility)
    print(f"{sub.exercise}: {sub.score:g}/{sub.max_score:g}; seed {run.seed}")
    return gradescope_json(sub, settings.visibility, run.seed, data.get("note"))


def parent(root: Path, settings_path: Path) -> int:
    """Write ``root/results/results.json`` whatever happens; 0 when it was written."""
    started = time.monotonic()
    results = root / "results" / "results.json"
    print(f"backprop-ninja {__version__} (Gradescope autograder), as uid {os.geteuid()}")
    try:
        settings = Settings.from_text(settings_path.read_text(encoding="utf-8"))
        print(f"settings: {settings.to_text()}")
        data = results_for(root, settings)
    except Exception:  # the kit's own fault: the log has the trace, the student a sentence
        traceback.print_exc(file=sys.stdout)
        data = failure_json(GRADER_FAILED)
    data["execution_time"] = round(time.monotonic() - started, 1)
    write_json(results, data)
    print(f"wrote {results}: score {data['score']:g}")
    sys.stdout.flush()
    return 0


# --- the child: the kit's grader, unprivileged ----------------------------------------------------


def choose_submission(path: Path, assignment: str | None) -> tuple[Submission, str | None] | str:
    """``(submission, note)`` to grade from the notebook at ``path``, or why it cannot be
    graded, in the student's words. A kit notebook is graded as the exercise its metadata or
    grade ids name; a notebook in the lecture's own format, as each exercise it answers (the
    assignment's, else the first); with an assignment set, another exercise's notebook is
    refused."""
    try:
        if assignment is not None:
            sub = load_assignment(path, EXERCISES[assignment])
        else:
            sub = load_submissions(path)[0]
    except WrongExercise as e:
        return str(e)
    except SubmissionError as e:
        return f"Your notebook could not be read: {e}."
    note = None
    if not sub.answers:
        note = (
            f"No answer of {sub.exercise.text.title} was found in this notebook: answer in the "
            "cells of the released notebook and submit that notebook."
        )
    elif sub.format != "kit":
        note = f"Graded as {sub.exercise.text.title}, from the lecture's own notebook format."
    elif assignment is None:  # each notebook its own exercise: say which, for student and staff
        note = f"Graded as {sub.exercise.text.title} ({sub.exercise.id})."
    return sub, note


def child(notebook: str, out: Path, settings: Settings, mode: str = "confined") -> int:
    """Grade one notebook and write ``out``: ``{"run", "confinement", "why", "note"}``;
    ``{"refused"}`` when the notebook cannot be graded (the student's words in it);
    ``{"no-sandbox"}`` when ``mode`` is ``confined`` and no sandbox can be set up here."""
    from ..engine.grader import Grader
    from ..sandbox.limits import Limits
    from ..sandbox.pool import SandboxUnavailable

    picked = choose_submission(Path(notebook), settings.assignment)
    if isinstance(picked, str):
        write_json(out, {"refused": picked, "confinement": "-", "why": "nothing was run"})
        return 0
    sub, note = picked
    limits = Limits(step_seconds=settings.step_seconds, budget_seconds=settings.budget_seconds)
    try:
        grader = Grader(
            seed=settings.seed,
            limits=limits,
            jobs=1,
            sandbox="auto" if mode == "confined" else "none",
        )
    except SandboxUnavailable as e:
        write_json(out, {"no-sandbox": str(e)})
        return 0
    why = (
        grader.pool.confinement.reason
        if settings.sandbox != "none"
        else "the bundle was built with --sandbox none"
    )
    print(f"grader: uid {os.getuid()}, answers confined by {grader.confinement} ({why})")
    try:
        result = grader.grade_submission(sub)
        confinement = grader.confinement
    finally:
        grader.close()  # no answer runs any more when the results are written
    run = RunResult(seed=grader.seed, submissions=[result], version=__version__)
    data = {"run": run.to_json(), "confinement": confinement, "why": why, "note": note}
    write_json(out, data)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m autograder.integrations.gradescope_run",
        description="Grade the submission in Gradescope's /autograder (run_autograder's work).",
    )
    p.add_argument("--root", type=Path, default=Path("/autograder"))
    p.add_argument("--settings", type=Path, help="the bundle's settings file")
    p.add_argument("--grade", metavar="NOTEBOOK", help=argparse.SUPPRESS)  # the child
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--settings-json", help=argparse.SUPPRESS)
    p.add_argument(
        "--mode", choices=["confined", "none"], default="confined", help=argparse.SUPPRESS
    )
    args = p.parse_args(argv)
    if args.grade:
        return child(args.grade, args.out, Settings.from_text(args.settings_json), args.mode)
    settings = args.settings or args.root / "source" / SETTINGS_FILE
    return parent(args.root, settings)


if __name__ == "__main__":
    sys.exit(main())

"""Grading results as plain data: one record per step, one per submission, one per run.

These are what the CLI prints, what ``--json`` writes (``RunResult.to_json``), what the pytest
plugin asserts on and what the reports draw. Field names of the JSON are part of the kit's
interface: ``submissions[].path/exercise/score/max_score/error/steps[]`` and
``steps[].step/passed/score/max_score/diagnoses[].code/message`` never change meaning.

Every file the kit writes is strict JSON: a non-finite number (the largest difference of an
answer holding ``nan``) is written as ``null``, never as ``NaN`` or ``Infinity``, which strict
parsers (JavaScript's) refuse.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Diagnosis:
    """What went wrong in a step, for the student: a stable kebab-case code and one or two
    sentences (what was found, what was expected, how to fix it; never reference values or
    solution code)."""

    code: str
    message: str


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one hidden configuration of a step."""

    case: str  # case name, e.g. "lecture", "sizes-a"
    passed: bool
    maxdiff: float | None  # max |answer - reference|, None when not comparable
    tolerance: float | None  # the bound maxdiff had to stay under
    status: str  # "ok", "wrong-value", "shape-mismatch", "error", "not-a-tensor", ...


@dataclass(frozen=True)
class RowReport:
    """For dC (lecture case): how often the batch used each row of C, and which rows are wrong."""

    uses: list[int]  # uses[r] = occurrences of row r in Xb
    wrong: list[int]  # rows whose gradient differs from the reference
    repeated: list[int]  # rows used more than once


@dataclass(frozen=True)
class StepResult:
    """The grade of one step of one submission."""

    step: str  # gradient name, e.g. "dC"
    passed: bool
    score: float
    max_score: float
    maxdiff: float | None  # on the lecture case, float64 reference
    exact: bool | None  # bit-equal to autograd's float32 gradient on the lecture case (information)
    shape: list[int] | None  # shape of the answer on the lecture case
    expected_shape: list[int]  # shape of the variable on the lecture case
    dtype: str | None  # dtype of the answer, e.g. "float32"
    diagnoses: list[Diagnosis] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)
    rows: RowReport | None = None  # a scatter into a table (dC) only
    seconds: float = 0.0  # wall time of the answer in its sandbox
    where: str | None = None  # where the answer was found ("cell 12, lines 3-5")


@dataclass
class SubmissionResult:
    """The grade of one notebook."""

    path: str
    score: float
    max_score: float
    error: str | None  # why (part of) the submission could not be graded, else None
    steps: list[StepResult] = field(default_factory=list)
    exercise: str = "backprop_ninja"  # the assignment id the notebook was graded as
    format: str = "kit"  # "kit" (nbgrader cells by grade id) or "lecture" (the lecture's own)

    def step(self, name: str) -> StepResult:
        for s in self.steps:
            if s.step == name:
                return s
        raise KeyError(name)


@dataclass
class RunResult:
    """A grading run: the seed that replays it and every submission's result."""

    seed: int
    submissions: list[SubmissionResult] = field(default_factory=list)
    kit: str = "backprop-ninja"
    version: str = ""
    shard: str | None = None  # "K/N" when this run graded one part of a class
    fragments: dict[int, str] = field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "submissions": [submission_json(s) for s in self.submissions],
            "kit": self.kit,
            "version": self.version,
            "shard": self.shard,
        }

    def json_text(self, fragments: dict[int, str] | None = None) -> str:
        """The run as strict JSON text, one submission per line. ``fragments`` keeps each
        submission's text by object id, so a long batch that rewrites its file as it goes
        serialises every submission once."""
        memo = fragments if fragments is not None else {}
        lines = []
        for sub in self.submissions:
            if id(sub) not in memo:
                memo[id(sub)] = submission_text(sub, memo)
            lines.append(memo[id(sub)])
        head = {"seed": self.seed, "kit": self.kit, "version": self.version, "shard": self.shard}
        fields = json.dumps(head)[1:-1]
        return "{" + fields + ', "submissions": [\n' + ",\n".join(lines) + "\n]}\n"


def _number(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def step_json(s: StepResult) -> dict[str, Any]:
    """One step's result as JSON data (strict: non-finite numbers as null); no deep copies."""
    return {
        "step": s.step,
        "passed": s.passed,
        "score": s.score,
        "max_score": s.max_score,
        "maxdiff": _number(s.maxdiff),
        "exact": s.exact,
        "shape": s.shape,
        "expected_shape": s.expected_shape,
        "dtype": s.dtype,
        "diagnoses": [{"code": d.code, "message": d.message} for d in s.diagnoses],
        "cases": [
            {
                "case": c.case,
                "passed": c.passed,
                "maxdiff": _number(c.maxdiff),
                "tolerance": _number(c.tolerance),
                "status": c.status,
            }
            for c in s.cases
        ],
        "rows": (
            {"uses": s.rows.uses, "wrong": s.rows.wrong, "repeated": s.rows.repeated}
            if s.rows
            else None
        ),
        "seconds": _number(s.seconds),
        "where": s.where,
    }


def submission_text(sub: SubmissionResult, memo: dict[int, str]) -> str:
    """``json.dumps(submission_json(sub))``, with each step's text kept in ``memo`` by object
    id: the grader gives every submission with the same answer the same step object, so a
    class of copies serialises each step once. (The ids stay valid while the run holds the
    submissions.)"""
    steps = []
    for step in sub.steps:
        if id(step) not in memo:
            memo[id(step)] = json.dumps(step_json(step), allow_nan=False)
        steps.append(memo[id(step)])
    head = {"path": sub.path, "score": sub.score, "max_score": sub.max_score, "error": sub.error}
    tail = {"exercise": sub.exercise, "format": sub.format}
    return (
        json.dumps(head, allow_nan=False)[:-1]
        + ', "steps": ['
        + ", ".join(steps)
        + "], "
        + json.dumps(tail, allow_nan=False)[1:]
    )


def submission_json(sub: SubmissionResult) -> dict[str, Any]:
    """One submission's result as JSON data (see :func:`step_json`)."""
    return {
        "path": sub.path,
        "score": sub.score,
        "max_score": sub.max_score,
        "error": sub.error,
        "steps": [step_json(s) for s in sub.steps],
        "exercise": sub.exercise,
        "format": sub.format,
    }


def submission_from_json(data: dict[str, Any]) -> SubmissionResult:
    """Rebuild a SubmissionResult from its JSON form (``--resume``, reports)."""
    steps = []
    for s in data.get("steps", []):
        s = dict(s)
        s["diagnoses"] = [Diagnosis(**d) for d in s.get("diagnoses", [])]
        s["cases"] = [CaseResult(**c) for c in s.get("cases", [])]
        s["rows"] = RowReport(**s["rows"]) if s.get("rows") else None
        steps.append(StepResult(**s))
    return SubmissionResult(
        path=data["path"],
        score=data["score"],
        max_score=data["max_score"],
        error=data.get("error"),
        steps=steps,
        exercise=data.get("exercise", "backprop_ninja"),
        format=data.get("format", "kit"),
    )


def run_from_json(data: dict[str, Any]) -> RunResult:
    """Rebuild a RunResult from the JSON written by ``--json``."""
    return RunResult(
        seed=int(data.get("seed", 0)),
        submissions=[submission_from_json(s) for s in data.get("submissions", [])],
        kit=data.get("kit", "backprop-ninja"),
        version=data.get("version", ""),
        shard=data.get("shard"),
    )


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename, so
    a reader (or an interrupted run) never sees a partial file. A lone surrogate (from a file
    name or a student's message, if a writer let one through) is written as its escape,
    ``\\udcff``, rather than stopping the write."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; a results file is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(data: Any, indent: int | None = 2) -> str:
    """``data`` as strict JSON: non-finite floats become null, and any left would raise."""
    return json.dumps(finite(data), indent=indent, allow_nan=False)


def write_json(path: Path, data: Any) -> None:
    """Atomically write ``data`` as indented, strict JSON; a :class:`RunResult` is written one
    submission per line, each serialised once however often the file is rewritten."""
    if isinstance(data, RunResult):
        write_atomic(path, data.json_text(data.fragments))
    else:
        write_atomic(path, dumps(data) + "\n")

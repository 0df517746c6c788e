"""The grading engine: every step of every submission, in isolation, under every hidden case.

Each submission's answers go to a sandbox (:mod:`autograder.pool`, :mod:`autograder.sandbox`)
where every step runs its code once per hidden case (:func:`autograder.worker.run_answer`),
isolated from the other steps; the grader validates what comes back, compares it with the float64
reference in its own process, and turns the evidence into a verdict and diagnoses
(:mod:`autograder.diagnose`).

A case passes when the answer has exactly the variable's shape and

    max |answer - reference|  <=  RTOL * max(max|reference|, max|upstream gradients|)

The scale is the larger of the two because some true gradients (``dlogit_maxes``, ``db1``) cancel
to ~0, leaving only float32 rounding of terms the size of the upstream gradients. A step passes
when every case passes, it did not use autograd, and it did not change any of its inputs.
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import torch

from . import __version__
from .cases import Case, build_cases
from .catalog import BY_NAME, STEPS, Step, total_points
from .diagnose import Evidence, diagnose, wrong_rows
from .pool import ForkServer, Job
from .results import CaseResult, RowReport, RunResult, StepResult, SubmissionResult
from .sandbox import Limits, Outcome
from .submission import Submission, SubmissionError, is_stub, load_submission
from .worker import Answer, PayloadError, parse_payload, run_answer

RTOL = 1e-4
"""Tolerance relative to the case's scale; float32 answers land within ~1e-6 of it."""


def compare(step: Step, case: Case, answer: Answer) -> CaseResult:
    """Judge one case of one step: strict shape, then the max difference against the scale."""
    if answer.kind != "tensor" or answer.tensor is None:
        return CaseResult(case.name, False, None, None, answer.kind)
    ref = case.reference(step)
    got = answer.tensor
    if tuple(got.shape) != tuple(ref.shape):
        return CaseResult(case.name, False, None, None, "shape-mismatch")
    tol = RTOL * case.scale(step)
    if got.numel() == 0:
        return CaseResult(case.name, True, 0.0, tol, "ok")
    diff = (got.to(torch.float64) - ref).abs()
    maxdiff = float(diff.max()) if bool(torch.isfinite(diff).all()) else float("inf")
    passed = maxdiff <= tol
    return CaseResult(case.name, passed, maxdiff, tol, "ok" if passed else "wrong-value")


def row_report(case: Case, step: Step, answer: Answer, tol: float | None) -> RowReport:
    """dC: how often the batch used each row of C and which rows of the answer are off."""
    wrong, repeated = wrong_rows(case, step, answer, tol) if tol is not None else (set(), set())
    if tol is None:
        repeated = {int(r) for r in torch.nonzero(case.row_uses() > 1).flatten()}
    return RowReport(
        uses=[int(u) for u in case.row_uses()], wrong=sorted(wrong), repeated=sorted(repeated)
    )


class Grader:
    """Grades submissions under one seed's hidden cases.

    Building a Grader builds the hidden cases and starts the fork server its sandboxes come from.
    ``limits`` bound each step; ``jobs`` is the number of sandboxes alive at once (0: one per
    core). Call :meth:`close` (or drop the Grader) to stop the server.
    """

    def __init__(
        self, seed: int | None = None, limits: Limits | None = None, jobs: int = 0
    ) -> None:
        self.seed = secrets.randbelow(2**31) if seed is None else int(seed)
        self.limits = limits or Limits()
        self.jobs = jobs
        self.cases = build_cases(self.seed)
        # Every sandbox is forked from this server, forked now, before any reference exists
        # (references are computed here, in the grader, on first use), so no student code can
        # find them in its memory.
        self._server = ForkServer(self._make_task, self.limits, jobs)
        self._finalizer = weakref.finalize(self, self._server.close)

    # -- one step -------------------------------------------------------------------------

    def judge(
        self, step: Step, code: str | None, outcome: Outcome | None, problem: str | None = None
    ) -> StepResult:
        """Turn a worker's outcome (or the lack of one) into the step's result."""
        answers: dict[str, Answer] = {}
        failure = problem
        if outcome is not None and outcome.status == "ok":
            try:
                answers = parse_payload(outcome.payload, self.cases)
            except PayloadError as e:
                failure = f"the worker's result could not be read ({e})"
        elif outcome is not None:
            failure = outcome.detail
        elif code is not None and is_stub(code):
            answers = {c.name: Answer(kind="not-implemented") for c in self.cases}
        verdicts = [
            compare(step, c, answers[c.name])
            if c.name in answers
            else CaseResult(c.name, False, None, None, "no-result")
            for c in self.cases
        ]
        lecture, lecture_answer = self.cases[0], answers.get(self.cases[0].name)
        ev = Evidence(
            step=step,
            code=code,
            cases=self.cases,
            answers=answers,
            verdicts=verdicts,
            outcome=outcome,
            problem=failure,
        )
        diagnoses = diagnose(ev)
        blocking = {"uses-autograd", "tampering", "in-place-mutation"}
        passed = (
            bool(answers)
            and all(v.passed for v in verdicts)
            and not any(d.code in blocking for d in diagnoses)
        )
        t = lecture_answer.tensor if lecture_answer is not None else None
        exact = None
        if (
            t is not None
            and step.name in lecture.exact
            and t.shape == lecture.exact[step.name].shape
        ):
            exact = bool(torch.equal(t, lecture.exact[step.name]))
        return StepResult(
            step=step.name,
            passed=passed,
            score=step.points if passed else 0.0,
            max_score=step.points,
            maxdiff=verdicts[0].maxdiff,
            exact=exact,
            shape=list(t.shape) if t is not None else None,
            expected_shape=list(lecture.reference(step).shape),
            dtype=str(t.dtype).removeprefix("torch.") if t is not None else None,
            diagnoses=diagnoses,
            cases=verdicts,
            rows=(
                row_report(
                    lecture, step, lecture_answer or Answer(kind="missing"), verdicts[0].tolerance
                )
                if step.var == "C"
                else None
            ),
            seconds=outcome.seconds if outcome is not None else 0.0,
        )

    def task(self, step: Step, code: str) -> Callable[[], bytes]:
        """The function a sandbox runs for one answer (it reads this process's cases)."""
        cases = self.cases
        return lambda: run_answer(step, cases, code)

    def _make_task(self, name: str, code: str) -> Callable[[], bytes]:
        return self.task(BY_NAME[name], code)

    def grade_code(self, step: Step, code: str) -> StepResult:
        """Grade one answer of one step (the in-notebook hidden tests use this)."""
        [(_, results)] = list(self._iter_grade({0: {step.name: code}}, {0: {}}, only=step))
        return results[step.name]

    def _iter_grade(
        self,
        answers: Mapping[int, Mapping[str, str]],
        problems: Mapping[int, Mapping[str, str]],
        only: Step | None = None,
    ) -> Iterator[tuple[int, dict[str, StepResult]]]:
        """Grade several submissions at once, yielding ``(key, results by step)`` as each one
        completes. All their steps go to the fork server in one request."""
        steps = [only] if only else list(STEPS)
        results: dict[int, dict[str, StepResult]] = {k: {} for k in answers}
        jobs: list[Job] = []
        for key, sub in answers.items():
            to_run = []
            for step in steps:
                code = sub.get(step.name)
                if code is None or is_stub(code):
                    why = problems[key].get(step.name)
                    results[key][step.name] = self.judge(step, code, None, why)
                else:
                    to_run.append((step.name, code))
            if to_run:
                jobs.append((key, to_run))
            else:
                yield key, results.pop(key)
        waiting = {key: len(to_run) for key, to_run in jobs}
        for key, name, outcome in self._server.run(jobs):
            results[key][name] = self.judge(BY_NAME[name], answers[key][name], outcome)
            waiting[key] -= 1
            if waiting[key] == 0:
                yield key, results.pop(key)

    # -- many submissions -------------------------------------------------------------------

    def grade_submission(self, sub: Submission) -> SubmissionResult:
        """Grade one submission already read (nbgrader hands the kit notebooks in memory)."""
        [(_, results)] = list(self._iter_grade({0: sub.answers}, {0: sub.problems}))
        return self._result(sub, results)

    @staticmethod
    def _result(sub: Submission, results: Mapping[str, StepResult]) -> SubmissionResult:
        steps = [results[s.name] for s in STEPS]
        return SubmissionResult(
            path=str(sub.path),
            score=sum(s.score for s in steps),
            max_score=total_points(),
            error="; ".join(f"{k}: {v}" for k, v in sub.problems.items()) or None,
            steps=steps,
        )

    def grade_paths(self, paths: Iterable[Path]) -> Iterator[SubmissionResult]:
        """Grade notebooks, yielding each submission's result as soon as its last step is done
        (not necessarily in input order). A file that cannot be read yields a result with
        ``error`` set and no steps; nothing a submission does stops the batch."""
        subs: dict[int, Submission] = {}
        for i, path in enumerate(paths):
            try:
                subs[i] = load_submission(Path(path))
            except SubmissionError as e:
                yield SubmissionResult(
                    path=str(path), score=0.0, max_score=total_points(), error=str(e), steps=[]
                )
        answers = {i: sub.answers for i, sub in subs.items()}
        problems = {i: sub.problems for i, sub in subs.items()}
        for i, results in self._iter_grade(answers, problems):
            yield self._result(subs.pop(i), results)

    def run(self, paths: Iterable[Path]) -> RunResult:
        """Grade everything and return the run (submissions in completion order)."""
        return RunResult(
            seed=self.seed, submissions=list(self.grade_paths(paths)), version=__version__
        )

    def close(self) -> None:
        """Stop the fork server (also done when the Grader is garbage-collected)."""
        self._finalizer()


__all__ = ["RTOL", "Grader", "compare"]

"""The grading engine: every step of every submission, in isolation, under every hidden case.

For each (submission, step) the engine forks one sandboxed worker (:mod:`autograder.sandbox`)
that runs the answer code once per case (:func:`autograder.worker.run_answer`); the parent
validates what comes back, compares it with the float64 reference in the trusted process, and
turns the evidence into a verdict and diagnoses (:mod:`autograder.diagnose`).

A case passes when the answer has exactly the variable's shape and

    max |answer - reference|  <=  RTOL * max(max|reference|, max|upstream gradients|)

The scale is the larger of the two because some true gradients (``dlogit_maxes``, ``db1``) cancel
to ~0, leaving only float32 rounding of terms the size of the upstream gradients. A step passes
when every case passes, it did not use autograd, and it did not change any of its inputs.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import torch

from . import __version__
from .cases import Case, build_cases
from .catalog import STEPS, Step, total_points
from .diagnose import Evidence, diagnose, wrong_rows
from .results import CaseResult, Diagnosis, RowReport, RunResult, StepResult, SubmissionResult
from .sandbox import Limits, Outcome, run_many
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

    Building a Grader computes every case and reference once; workers forked afterwards share
    them. ``limits`` bound each step's worker; ``jobs`` is the number of workers alive at once
    (0: one per core).
    """

    def __init__(
        self, seed: int | None = None, limits: Limits | None = None, jobs: int = 0
    ) -> None:
        self.seed = secrets.randbelow(2**31) if seed is None else int(seed)
        self.limits = limits or Limits()
        self.jobs = jobs
        # References are computed on first use, in the parent, while the first workers run.
        self.cases = build_cases(self.seed)

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
        blocking = {"uses-autograd", "in-place-mutation"}
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
        """The function a forked worker runs for one answer."""
        cases = self.cases
        return lambda: run_answer(step, cases, code)

    def grade_code(self, step: Step, code: str) -> StepResult:
        """Grade one answer of one step (used by the in-notebook hidden tests)."""
        if is_stub(code):
            return self.judge(step, code, None)
        outcome = next(iter(run_many([(0, self.task(step, code))], self.limits, jobs=1)))[1]
        return self.judge(step, code, outcome)

    # -- many submissions -------------------------------------------------------------------

    def grade_paths(
        self,
        paths: Iterable[Path],
        on_result: Callable[[SubmissionResult], None] | None = None,
    ) -> Iterator[SubmissionResult]:
        """Grade notebooks, yielding each submission's result as soon as its last step is done
        (not necessarily in input order). A file that cannot be read yields a result with
        ``error`` set and no steps; nothing a submission does stops the batch."""
        subs: dict[int, Submission] = {}
        pending: dict[int, dict[str, StepResult]] = {}
        todo: dict[int, int] = {}
        paths = list(paths)

        def finish(i: int) -> SubmissionResult:
            sub = subs.pop(i)
            steps = [pending[i][s.name] for s in STEPS]
            del pending[i]
            problems = "; ".join(f"{k}: {v}" for k, v in sub.problems.items()) or None
            res = SubmissionResult(
                path=str(sub.path),
                score=sum(s.score for s in steps),
                max_score=total_points(),
                error=problems,
                steps=steps,
            )
            if on_result is not None:
                on_result(res)
            return res

        def tasks() -> Iterator[tuple[tuple[int, str], Callable[[], bytes]]]:
            for i, path in enumerate(paths):
                try:
                    sub = load_submission(Path(path))
                except SubmissionError as e:
                    ready.append(
                        SubmissionResult(
                            path=str(path),
                            score=0.0,
                            max_score=total_points(),
                            error=str(e),
                            steps=[],
                        )
                    )
                    continue
                subs[i], pending[i] = sub, {}
                to_run = []
                for step in STEPS:
                    code = sub.answers.get(step.name)
                    if code is None or is_stub(code):
                        pending[i][step.name] = self.judge(
                            step, code, None, sub.problems.get(step.name)
                        )
                    else:
                        to_run.append((step, code))
                # Counted before the first task starts: outcomes arrive while this generator waits.
                todo[i] = len(to_run)
                if not to_run:
                    ready.append(finish(i))
                for step, code in to_run:
                    yield (i, step.name), self.task(step, code)

        ready: list[SubmissionResult] = []
        for (i, name), outcome in run_many(tasks(), self.limits, self.jobs):
            step = next(s for s in STEPS if s.name == name)
            pending[i][name] = self.judge(step, subs[i].answers[name], outcome)
            todo[i] -= 1
            if todo[i] == 0:
                ready.append(finish(i))
            while ready:
                yield ready.pop(0)
        while ready:
            yield ready.pop(0)

    def run(
        self, paths: Iterable[Path], on_result: Callable[[SubmissionResult], None] | None = None
    ) -> RunResult:
        """Grade everything and return the run (submissions in completion order)."""
        return RunResult(
            seed=self.seed,
            submissions=list(self.grade_paths(paths, on_result)),
            version=__version__,
        )


def diagnosis_text(step: StepResult) -> str:
    """The diagnoses of a step as the one or two sentences shown to a student."""
    return " ".join(d.message for d in step.diagnoses)


__all__ = ["RTOL", "Diagnosis", "Grader", "compare", "diagnosis_text"]

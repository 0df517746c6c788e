"""The grading engine: every step of every submission, in isolation, under every hidden case.

A :class:`Grader` holds one seed's hidden cases for each exercise (built on first use) and a
:class:`~autograder.sandbox.pool.Pool` of sandboxes. Each submission's answers go to a sandbox
of their own, where each answer runs once per case in a fresh namespace holding only that
case's inputs; the grader validates what comes back, compares it with the float64 reference in
its own process (:mod:`autograder.grading.compare`) and turns the evidence into a verdict and
diagnoses (:mod:`autograder.diagnoses`).

**Each distinct answer once.** A class repeats itself: an answer is keyed by its exercise, its
step and its code normalised to its syntax tree (comments, blank lines, spacing and quoting do
not count; any other token does). The first submission holding an answer runs it in its own
sandbox; every later one with the same key gets the same outcome, judged against its own code
(an error's line number is translated into its own cell's lines). With ``cache`` set, outcomes
are also kept on disk for the next run with the same seed and kit version
(:mod:`autograder.grading.cache`).

Why one module of this length: the grader's loop (deduplication, scheduling, sharing outcomes)
and the verdict it builds change together; parsing, comparing, diagnosing and the sandboxes live
in their own modules.
"""

from __future__ import annotations

import ast
import functools
import secrets
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

import torch

from .. import __version__
from ..core import training
from ..core.cases import Case, build
from ..diagnoses.diagnose import Evidence, blame_gradients, diagnose, wrong_rows
from ..exercises import DEFAULT, Exercise, Step
from ..grading.answers import Answer, PayloadError, encode_bank, parse_payload
from ..grading.cache import OutcomeCache
from ..grading.compare import compare
from ..grading.loading import load_assignment, load_submissions
from ..grading.plain import is_plain
from ..grading.results import CaseResult, RowReport, RunResult, StepResult, SubmissionResult
from ..grading.submission import Submission, SubmissionError, is_stub
from ..sandbox.limits import Limits, Outcome
from ..sandbox.pool import Job, Pool, Task

AnswerKey = tuple[str, str, str]
"""(exercise id, step name, normalised code): answers with one key are graded once."""


@functools.lru_cache(maxsize=65536)
def normalise(code: str) -> str:
    """The code's syntax tree as text: comments, blank lines, spacing and quoting do not count.
    Code that does not parse is kept as it is, less trailing spaces."""
    try:
        return ast.dump(ast.parse(code), annotate_fields=False, include_attributes=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "\n".join(line.rstrip() for line in code.strip().splitlines())


def translate_line(source: str, target: str, line: int | None) -> int | None:
    """The line of ``target`` that corresponds to ``line`` of ``source``, two codes with the same
    syntax tree (the nodes are walked side by side)."""
    if line is None or source == target:
        return line
    try:
        a, b = ast.parse(source), ast.parse(target)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return line
    for x, y in zip(ast.walk(a), ast.walk(b), strict=False):
        if getattr(x, "lineno", None) == line and hasattr(y, "lineno"):
            return int(y.lineno)
    return line


@dataclass
class _Run:
    """One distinct answer: its first code, its outcome once known, the results per raw code."""

    code: str
    outcome: Outcome | None = None
    answers: dict[str, Answer] | None = None
    failure: str | None = None
    results: dict[str, StepResult] = field(default_factory=dict)
    large: bool = False  # answers too large to keep for later submissions (see KEEP_BYTES)


KEEP_BYTES = 1 << 20
"""A distinct answer whose tensors take more than this (no true answer comes near: the largest
is under 50 kB) is forgotten once the submissions waiting for it are graded, so a batch of
hostile answers of many MiB each costs the grader one at a time, not all at once."""


def _notebook_error(sub: Submission) -> str | None:
    """What is wrong with the notebook as a whole: its own reason, else its steps' problems in
    a kit notebook (cells deleted), or in a lecture notebook where no step's answer was found;
    a lecture notebook with some answers is fine as a whole (each blank step says why)."""
    if sub.error:
        return sub.error
    problems = sub.problems
    if sub.format == "lecture" and len(problems) < len(sub.exercise.steps):
        return None
    return "; ".join(f"{k}: {v}" for k, v in problems.items()) or None


class Grader:
    """Grades submissions under one seed's hidden cases.

    ``limits`` bound each answer and each submission; ``jobs`` is the number of sandboxes (0:
    one per core); ``sandbox`` is how they are confined (``auto``, ``userns``, ``bwrap``, or
    ``none`` to accept the risk); ``cache`` is a folder for outcomes kept between runs. Building
    a Grader starts its sandboxes; :meth:`close` (or dropping the Grader) stops them. A ``pool``
    started earlier (:func:`autograder.sandbox.pool.Pool`, warmed before torch is imported here,
    so both imports overlap) is used instead, with its limits.
    """

    def __init__(
        self,
        seed: int | None = None,
        limits: Limits | None = None,
        jobs: int = 0,
        sandbox: str = "auto",
        cache: Path | None = None,
        pool: Pool | None = None,
    ) -> None:
        self.seed = secrets.randbelow(2**31) if seed is None else int(seed)
        self.limits = pool.limits if pool is not None else limits or Limits()
        self.pool = pool if pool is not None else Pool(self.limits, jobs, sandbox)
        self._finalizer = weakref.finalize(self, self.pool.close)
        self.pool.warm()  # the sandboxes import torch while the cases are built
        self._cases: dict[str, list[Case]] = {}
        self._runs: dict[AnswerKey, _Run] = {}
        self.cache = OutcomeCache(cache, __version__, self.seed) if cache else None
        self.executed = 0  # answers run in sandboxes so far (each distinct answer once)
        self._placed_results: dict[tuple[int, str | None], tuple[StepResult, StepResult]] = {}

    @property
    def confinement(self) -> str:
        """How the sandboxes are confined (``userns``, ``bwrap`` or ``none``)."""
        return self.pool.confinement.mode

    def cases(self, ex: Exercise) -> list[Case]:
        """The hidden cases of ``ex`` for this seed (built, and sent to the sandboxes, once)."""
        if ex.id not in self._cases:
            cases = build(ex, self.seed)
            header, blobs = encode_bank(cases)
            self.pool.add_bank(ex.id, header, blobs)
            self._cases[ex.id] = cases
        return self._cases[ex.id]

    # -- one step -------------------------------------------------------------------------

    def judge(
        self,
        ex: Exercise,
        step: Step,
        code: str | None,
        outcome: Outcome | None = None,
        problem: str | None = None,
        answers: Mapping[str, Answer] | None = None,
    ) -> StepResult:
        """Turn a sandbox's outcome (or the lack of one) into the step's result."""
        cases = self.cases(ex)
        found: dict[str, Answer] = dict(answers or {})
        failure, timeout, autograd = problem, None, []
        if outcome is not None:
            autograd = outcome.autograd
            if outcome.status == "ok" and not found and failure is None:
                try:
                    found = parse_payload(outcome.payload, [c.name for c in cases])
                except PayloadError as e:
                    failure = f"the sandbox's result could not be read ({e})"
            elif outcome.status == "timeout":
                timeout = max(outcome.seconds, 1.0)
                failure = outcome.detail
            elif outcome.status != "ok":
                failure = outcome.detail
        elif code is not None and is_stub(code):
            found = {c.name: Answer(kind="not-implemented") for c in cases}
        verdicts = [
            compare(step, c, found[c.name])
            if c.name in found
            else CaseResult(c.name, False, None, None, "no-result")
            for c in cases
        ]
        ev = Evidence(
            exercise=ex,
            step=step,
            code=code,
            cases=cases,
            answers=found,
            verdicts=verdicts,
            timeout=timeout,
            problem=failure,
            autograd=list(autograd),
            memory_limit=f"{self.limits.memory_bytes / 2**30:g} GiB",
        )
        diagnoses = diagnose(ev)
        blocking = {"uses-autograd", "tampering", "in-place-mutation", "not-reset"}
        passed = (
            bool(found)
            and all(v.passed for v in verdicts)
            and not any(d.code in blocking for d in diagnoses)
        )
        lecture = cases[0]
        first = found.get(lecture.name)
        t = first.tensor if first is not None else None
        exact = None
        if (
            t is not None
            and step.name in lecture.exact
            and t.shape == lecture.exact[step.name].shape
        ):
            exact = bool(torch.equal(t, lecture.exact[step.name]))
        rows = None
        if step.scatter is not None:
            rows = _row_report(lecture, step, first or Answer(kind="missing"), verdicts[0])
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
            rows=rows,
            seconds=outcome.seconds if outcome is not None else 0.0,
        )

    def grade_code(
        self, ex: Exercise, step: Step, code: str, context: Mapping[str, str] | None = None
    ) -> StepResult:
        """Grade one answer of one step (the in-notebook hidden tests use this); ``context``
        holds the submission's other answers, which a training step runs too."""
        return self.grade_codes([(ex, step, code)], context)[0]

    def grade_codes(
        self, items: Iterable[tuple[Exercise, Step, str]], context: Mapping[str, str] | None = None
    ) -> list[StepResult]:
        """Grade many single answers at once, each as a submission of one step (in order). A
        training step runs with the other answers of ``context``, else the model answers."""
        subs = []
        for ex, step, code in items:
            sub = Submission(path=Path(f"<{step.name}>"), exercise=ex)
            if step.kind == "training":
                models = {s.name: s.answer for s in ex.steps}
                sub.answers.update(context if context is not None else models)
            sub.answers[step.name] = code
            subs.append((sub, step))
        results: list[StepResult | None] = [None] * len(subs)
        keyed = {i: (sub, [step]) for i, (sub, step) in enumerate(subs)}
        for i, by_step in self._grade(keyed):
            results[i] = by_step[subs[i][1].name]
        return [r for r in results if r is not None]

    # -- many submissions -------------------------------------------------------------------

    def _key(self, ex: Exercise, step: Step, code: str) -> AnswerKey:
        return (ex.id, step.name, normalise(code))

    def _result_for(self, run: _Run, ex: Exercise, step: Step, code: str) -> StepResult:
        """The result of ``code``, an answer whose run is known (judged once per raw code)."""
        if code not in run.results:
            answers = run.answers
            if answers is not None and code != run.code:
                answers = {
                    name: replace(a, lineno=translate_line(run.code, code, a.lineno))
                    for name, a in answers.items()
                }
            run.results[code] = self.judge(ex, step, code, run.outcome, run.failure, answers)
        return run.results[code]

    def _settle(self, run: _Run, ex: Exercise, outcome: Outcome) -> None:
        """Record ``outcome`` for ``run``: its answers parsed once; the payload itself is not
        kept (the answers hold its tensors), and a run whose answers are large is marked to be
        forgotten once its waiters are served (see :data:`KEEP_BYTES`)."""
        run.outcome = replace(outcome, payload=b"")
        if outcome.status == "ok":
            try:
                run.answers = parse_payload(outcome.payload, [c.name for c in self.cases(ex)])
            except PayloadError as e:
                run.failure = f"the sandbox's result could not be read ({e})"
        run.large = len(outcome.payload) > KEEP_BYTES

    def _grade(
        self, subs: Mapping[int, tuple[Submission, list[Step]]]
    ) -> Iterator[tuple[int, dict[str, StepResult]]]:
        """Grade ``{key: (submission, steps)}``; yield ``(key, results by step)`` as each
        submission completes (see the module docstring)."""
        pending: dict[int, dict[str, StepResult]] = {}
        waiting: dict[AnswerKey, list[tuple[int, str]]] = {}
        missing: dict[int, int] = {}
        jobs: list[Job] = []
        tasks_of: dict[AnswerKey, Task] = {}
        for key, (sub, steps) in list(subs.items()):
            ex = sub.exercise
            self.cases(ex)
            done: dict[str, StepResult] = {}
            tasks: list[Task] = []
            for step in steps:
                code = sub.answers.get(step.name)
                if code is None or is_stub(code):
                    done[step.name] = self.judge(ex, step, code, None, sub.problems.get(step.name))
                    continue
                if step.kind == "training":  # graded by a run of every cell of the submission
                    code = training.program(ex, step, sub.answers)
                akey = self._key(ex, step, code)
                run = self._runs.get(akey)
                if run is None and self.cache is not None:
                    cached = self.cache.get(akey)
                    if cached is not None:
                        run = self._runs[akey] = _Run(code)
                        self._settle(run, ex, cached)
                if run is not None and (run.outcome is not None or run.failure is not None):
                    done[step.name] = self._result_for(run, ex, step, code)
                    continue
                waiting.setdefault(akey, []).append((key, step.name))
                if run is None:
                    self._runs[akey] = _Run(code)
                    plain = is_plain(code, ex.provided)
                    tasks_of[akey] = Task(akey, step.name, step.upstream, code, plain)
                    tasks.append(tasks_of[akey])
            missing[key] = len(steps) - len(done)
            if missing[key] == 0:
                yield key, done
            else:
                pending[key] = done
                if tasks:
                    jobs.append(Job(ex.id, tuple(tasks)))
                    self.executed += len(tasks)
        while jobs:
            again: dict[int, list[Task]] = {}
            for task_key, outcome in self.pool.run(jobs):
                akey = cast(AnswerKey, task_key)
                waiters = waiting.pop(akey, [])
                ex = subs[waiters[0][0]][0].exercise
                run = self._runs[akey]
                if not outcome.own:
                    # The outcome says more about the rest of its submission (a budget spent by
                    # other answers, a sandbox that failed) than about this answer: it is that
                    # submission's alone, and the answer runs again for anyone else who has it.
                    del self._runs[akey]
                    run = _Run(run.code)
                    if len(waiters) > 1:
                        waiting[akey] = waiters[1:]
                        self._runs[akey] = _Run(subs[waiters[1][0]][0].answers[waiters[1][1]])
                        again.setdefault(waiters[1][0], []).append(tasks_of[akey])
                    waiters = waiters[:1]
                self._settle(run, ex, outcome)
                if self.cache is not None and outcome.own:
                    self.cache.put(akey, outcome)
                for key, name in waiters:
                    sub = subs[key][0]
                    step = sub.exercise.step(name)
                    code = sub.answers[name]
                    if step.kind == "training":
                        code = training.program(sub.exercise, step, sub.answers)
                    pending[key][name] = self._result_for(run, sub.exercise, step, code)
                    missing[key] -= 1
                    if missing[key] == 0:
                        yield key, pending.pop(key)
                if run.large and self._runs.get(akey) is run:
                    del self._runs[akey]  # its waiters have their results: let it go
            jobs = [Job(subs[key][0].exercise.id, tuple(tasks)) for key, tasks in again.items()]
            self.executed += sum(len(tasks) for tasks in again.values())

    def grade_submission(self, sub: Submission) -> SubmissionResult:
        """Grade one submission already read (nbgrader hands the kit notebooks in memory)."""
        [(_, results)] = list(self._grade({0: (sub, list(sub.exercise.steps))}))
        return self._result(sub, results)

    def _placed(self, result: StepResult, where: str | None) -> StepResult:
        """``result`` with ``where`` set: one object for every submission that shares both (so
        a class of copies shares its step results, and their JSON, too)."""
        key = (id(result), where)
        if key not in self._placed_results:
            self._placed_results[key] = (result, replace(result, where=where))
        return self._placed_results[key][1]

    def _result(self, sub: Submission, results: Mapping[str, StepResult]) -> SubmissionResult:
        ex = sub.exercise
        steps = [self._placed(results[s.name], sub.where.get(s.name)) for s in ex.steps]
        failed = [r.step for r in steps if not r.passed and ex.step(r.step).kind == "gradient"]
        for i, r in enumerate(steps):
            unanswered = [d.code for d in r.diagnoses] == ["not-implemented"]
            if ex.step(r.step).kind == "training" and not r.passed and failed and not unanswered:
                # the run calls every gradient cell: its first reason is theirs
                why = blame_gradients(ex, ex.step(r.step), failed)
                steps[i] = replace(r, diagnoses=[why, *r.diagnoses])
        return SubmissionResult(
            path=str(sub.path),
            score=sum(s.score for s in steps),
            max_score=ex.total_points,
            error=_notebook_error(sub),
            steps=steps,
            exercise=ex.id,
            format=sub.format,
        )

    def grade_paths(
        self, paths: Iterable[Path], assignment: Exercise | None = None
    ) -> Iterator[SubmissionResult]:
        """Grade notebooks, yielding each submission's result as soon as its last step is done
        (not necessarily in input order); the results of one notebook come one after another
        (see :meth:`grade_notebooks`)."""
        for results in self.grade_notebooks(paths, assignment):
            yield from results

    def grade_notebooks(
        self, paths: Iterable[Path], assignment: Exercise | None = None
    ) -> Iterator[list[SubmissionResult]]:
        """Grade notebooks, yielding each notebook's results as soon as its last step is done
        (not necessarily in input order). A notebook in the lecture's format may hold several
        submissions (Exercise 1, then 2 and 3): they come in one list, in that order, so a
        batch that keeps results as it goes never holds part of a notebook's. With an
        ``assignment``, each notebook gives that exercise's submission only, and a notebook of
        another exercise is refused (:func:`~autograder.grading.loading.load_assignment`). A
        file that cannot be read yields a result with ``error`` set and no steps; nothing a
        submission does stops the batch."""
        subs: dict[int, tuple[Submission, list[Step]]] = {}
        siblings: dict[int, list[int]] = {}  # submission key -> the keys of its notebook
        for path in paths:
            try:
                if assignment is not None:
                    found = [load_assignment(Path(path), assignment)]
                else:
                    found = load_submissions(Path(path))
            except SubmissionError as e:
                ex = assignment or DEFAULT
                yield [
                    SubmissionResult(
                        path=str(path),
                        score=0.0,
                        max_score=ex.total_points,
                        error=str(e),
                        steps=[],
                        exercise=ex.id,
                    )
                ]
                continue
            keys = list(range(len(subs), len(subs) + len(found)))
            for key, sub in zip(keys, found, strict=True):
                subs[key] = (sub, list(sub.exercise.steps))
                siblings[key] = keys
        done: dict[int, SubmissionResult] = {}
        for key, results in self._grade(subs):
            done[key] = self._result(subs[key][0], results)
            if all(k in done for k in siblings[key]):
                yield [done.pop(k) for k in siblings[key]]

    def run(self, paths: Iterable[Path], assignment: Exercise | None = None) -> RunResult:
        """Grade everything and return the run (submissions in completion order)."""
        found = list(self.grade_paths(paths, assignment))
        return RunResult(seed=self.seed, submissions=found, version=__version__)

    def close(self) -> None:
        """Stop the sandboxes (also done when the Grader is garbage-collected)."""
        self._finalizer()


_shared: dict[tuple[int, Limits, int, str], Grader] = {}


def shared_grader(seed: int | None, limits: Limits, jobs: int = 0, sandbox: str = "auto") -> Grader:
    """A Grader kept for the life of the process, one per (seed, limits, jobs, sandbox): nbgrader
    makes a new preprocessor for every notebook, and a Jupyter kernel runs one hidden test per
    step; building a Grader (its sandboxes, its cases) once serves them all. An unset seed is
    drawn once per process."""
    if seed is None:
        drawn = [key for key in _shared if key[1:] == (limits, jobs, sandbox)]
        seed = drawn[0][0] if drawn else secrets.randbelow(2**31)
    key = (seed, limits, jobs, sandbox)
    if key not in _shared:
        _shared[key] = Grader(seed=seed, limits=limits, jobs=jobs, sandbox=sandbox)
    return _shared[key]


def _row_report(case: Case, step: Step, answer: Answer, verdict: CaseResult) -> RowReport:
    """A table's gradient: how often the batch used each row and which rows are off."""
    uses = case.row_uses(step)
    if verdict.tolerance is not None:
        wrong, repeated = wrong_rows(case, step, answer, verdict.tolerance)
    else:
        wrong, repeated = set(), {int(r) for r in torch.nonzero(uses > 1).flatten()}
    return RowReport(uses=[int(u) for u in uses], wrong=sorted(wrong), repeated=sorted(repeated))


__all__ = ["Grader", "normalise", "shared_grader", "translate_line"]

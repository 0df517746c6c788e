"""Diagnoses: what a failing step did wrong, in a teacher's words, found from evidence.

Evidence comes from the answers themselves, compared with the reference across the hidden cases
(:mod:`autograder.diagnoses.evidence` holds the tests and their math); the source only supports
(the autograd names it uses, the size literals it writes, a ``one_hot`` without
``num_classes``). The words are in :mod:`autograder.diagnoses.messages`. The order in which
:func:`diagnose` looks, for a failing step:

1. nothing to grade: ``missing-cell``, ``timeout``, ``error`` (no result), ``not-implemented``;
2. what blocks a pass whatever the values: ``uses-autograd`` (an autograd entry point was
   called: the sandbox reports it from outside the answer's process), ``tampering`` (frames,
   ``gc``, ``ctypes`` or the grader's own modules), ``in-place-mutation``;
3. the pattern over cases: right at every case with the lecture's sizes and wrong at another size
   is ``hard-coded-size``, as is a ``one_hot`` whose width depends on the batch;
4. no tensor to compare: ``error`` (type and line of the exception), ``not-a-tensor``;
5. the wrong shape: ``transposed`` when the values are the transpose, else ``shape-mismatch``
   (a missing or extra ``keepdim``, a view not undone, a broadcast ``cmp`` would have hidden);
6. the right shape, wrong values: ``scatter-drops-duplicates`` (a table's gradient), then the
   fitted relations ``sign-flip``, ``missing-branch``, ``wrong-scale``; then the pattern over
   upstream gradients, ``upstream-shortcut`` (right at the true upstream gradient only) and
   ``ignores-upstream`` (the same answer whatever the upstream gradient); else ``wrong-value``.

Exactly one diagnosis comes from steps 3-6, after those of step 2; ``dtype-mismatch`` is added
last as a note and never fails a step by itself.

Why one module of this length: the order above is the design; it reads top to bottom as one
decision, each step a short function, and splitting it would scatter that order.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import torch

from ..core.cases import Case
from ..core.portable import (
    FLOOR,
    PROGRAM_HEADER,
    as64,
    autograd_training,
    carries_over,
    grouped_updates,
    maxabs,
    shape_slip,
    transposed_match,
    wrong_updates,
)
from ..exercises.definition import Exercise, Step
from ..grading.answers import Answer
from ..grading.compare import tolerance
from ..grading.results import CaseResult, Diagnosis
from .evidence import (
    LECTURE_SIZES,
    USES,
    autograd_names,
    broadcast_match,
    is_lecture_size,
    missing_factor,
    one_hot_without_classes,
    relation,
    reshape_match,
    size_literals,
    tamper_names,
    wrong_rows,
)
from .messages import TEXT, hint, path_of, say


@dataclass
class Evidence:
    """Everything known about one step of one submission."""

    exercise: Exercise
    step: Step
    code: str | None  # the answer cell, None if it is missing
    cases: list[Case]
    answers: dict[str, Answer]  # case name -> what the code produced there
    verdicts: list[CaseResult]  # one per case, in case order
    timeout: float | None = None  # seconds after which the answer was stopped, if it was
    problem: str | None = None  # why there are no answers, if that is known
    autograd: list[str] = field(default_factory=list)  # entry points the sandbox saw called
    memory_limit: str = "4 GiB"  # what an answer may allocate, in words


def _shape(shape: torch.Size | list[int] | tuple[int, ...]) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _tensor(ev: Evidence, case: Case) -> torch.Tensor | None:
    answer = ev.answers.get(case.name)
    return answer.tensor if answer is not None else None


def _tol(case: Case, step: Step) -> float:
    """The engine's tolerance for a case (the verdicts carry it only for right-shaped answers)."""
    return tolerance(case, step)


def diagnose(ev: Evidence) -> list[Diagnosis]:
    """The diagnoses of one step, most telling first; empty for a correct answer."""
    ex, step = ev.exercise, ev.step
    if ev.code is None:
        return [
            Diagnosis("missing-cell", ev.problem or f"The answer cell for {step.name} is missing.")
        ]
    if ev.timeout is not None:
        if ev.problem and "budget" in ev.problem:
            return [say(ex, step, "timeout.budget")]
        return [say(ex, step, "timeout", seconds=max(1, round(ev.timeout)))]
    if not ev.answers:
        return [say(ex, step, "no-result", problem=ev.problem)]
    program = ev.code.startswith(PROGRAM_HEADER)  # a training run: NotImplemented is a cell's
    if not program and all(a.kind == "not-implemented" for a in ev.answers.values()):
        if ev.problem:  # no answer was found, and the reader says what it looked for
            return [say(ex, step, "not-implemented.missing", problem=ev.problem)]
        return [say(ex, step, "not-implemented")]

    out: list[Diagnosis] = []
    names = autograd_names(ev.code)
    called = [n for n in ev.autograd if n not in names]
    if names or called or any(a.autograd for a in ev.answers.values()):
        used = ", ".join(f"`{n}`" for n in [*names, *called]) or "autograd"
        out.append(say(ex, step, "uses-autograd", used=used))
    values = all(v.passed for v in ev.verdicts)
    tampered = tamper_names(ev.code)
    tampering = say(ex, step, "tampering", used=", ".join(f"`{n}`" for n in tampered))
    if tampered and values:
        out.append(tampering)  # the reason right values score nothing
    trains = any(s.kind == "training" for s in ex.steps)  # its cells run again and again
    if trains and step.kind == "gradient" and values and carries_over(ev.code, step.name):
        out.append(say(ex, step, "not-reset"))
    known = set(ev.cases[0].graph) | set(step.upstream)  # names, not text from the sandbox
    mutated = sorted({m for a in ev.answers.values() for m in a.mutated if m in known})
    if mutated and step.kind != "training":  # training changes the parameters, as it must
        out.append(say(ex, step, "in-place-mutation", what=", ".join(f"`{m}`" for m in mutated)))
    if not values and step.kind == "training":
        out.append(_training(ev))
    elif not values:
        try:
            out.append(
                _hard_coded(ev)
                or _no_tensor(ev)
                or _wrong_shape(ev)
                or _shift_pattern(ev)
                or _wrong_values(ev)
            )
        except Exception:  # pragma: no cover - a diagnosis must never stop the grading
            out.append(say(ex, step, "wrong-value"))
    if tampered and not values:  # after what went wrong with the values themselves
        out.append(tampering)
    first = ev.answers.get(ev.cases[0].name)
    if first is None or first.tensor is None or step.kind == "training":
        return out  # (a training run's outcome is float64 by the program, not by the student)
    if first.tensor.dtype != torch.float32:
        out.append(
            say(ex, step, "dtype-mismatch", dtype=str(first.tensor.dtype).removeprefix("torch."))
        )
    return out


def _hard_coded(ev: Evidence) -> Diagnosis | None:
    """Right at every case with the lecture's sizes and wrong at another size; or a ``one_hot``
    without ``num_classes`` behind failures that are all about shapes."""
    step, pairs = ev.step, list(zip(ev.cases, ev.verdicts, strict=True))
    if (
        ev.code
        and one_hot_without_classes(ev.code)
        and all(
            v.passed or v.status == "shape-mismatch" or _shape_error(ev.answers.get(c.name))
            for c, v in pairs
        )
    ):
        return say(ev.exercise, step, "one-hot")
    other_bad = [(c, v) for c, v in pairs if not is_lecture_size(c) and not v.passed]
    if not other_bad or not all(v.passed for c, v in pairs if is_lecture_size(c)):
        return None
    if all(c.spec.shift != "none" for c, _ in other_bad):
        return None  # only where the values are unusual: see _shift_pattern
    case, verdict = next((c, v) for c, v in other_bad if c.spec.shift == "none")
    answer = ev.answers.get(case.name)
    if answer is not None and answer.kind == "error":
        how = f"raised {(answer.error or 'an exception').split(':')[0]}"
        how += f" on line {answer.lineno}" if answer.lineno else ""
    else:
        how = "has the wrong shape" if verdict.status == "shape-mismatch" else "has wrong values"
    found = ", ".join(f"{v} for `{LECTURE_SIZES[v]}`" for v in size_literals(ev.code or ""))
    return say(
        ev.exercise,
        step,
        "hard-coded-size",
        how=how,
        literals=f" (your code writes {found})" if found else "",
    )


def _training(ev: Evidence) -> Diagnosis:
    """A training run that does not track autograd's: an error, or an update that does nothing,
    goes the wrong way or takes the wrong step (the outcomes of training with ``lr`` times 0,
    -1, 2 or 1/2 are tried), an update wrong for some parameters (named, from the probe update
    of known values), or else an update that is wrong some other way."""
    ex, step = ev.exercise, ev.step
    for a in (ev.answers[c.name] for c in ev.cases if c.name in ev.answers):
        if a.kind in ("error", "not-implemented"):
            kind, _, detail = (a.error or "an exception").splitlines()[0][:200].partition(": ")
            return say(
                ex, step, "training.error", kind=kind, detail=f" ({detail})" if detail else ""
            )
        if a.tensor is None:
            return _no_tensor(ev) or say(ex, step, "training.diverges")
    slips = {"training.no-update": 0.0, "training.sign": -1.0}
    slips |= {"training.scale": 2.0}
    for key, factor in [*slips.items(), ("training.scale", 0.5)]:
        if all(
            v.passed or _matches_training(c, step, ev.answers[c.name], factor, v.tolerance)
            for c, v in zip(ev.cases, ev.verdicts, strict=True)
        ):
            return say(ex, step, key)
    for c, v in zip(ev.cases, ev.verdicts, strict=True):
        out = ev.answers.get(c.name)
        if v.passed or out is None or out.tensor is None or v.tolerance is None:
            continue
        params = {k: c.graph[k] for k in ex.parameters}
        wrong = wrong_updates(out.tensor, params, c.graph["lr"], v.tolerance)
        if wrong:
            words = {how: TEXT[f"training.part.{how}"] for how in set(wrong.values())}
            parts = grouped_updates(wrong, words)
            return say(ex, step, "training.parameters", parts=parts)
    return say(ex, step, "training.diverges")


def _matches_training(
    case: Case, step: Step, answer: Answer, factor: float, tol: float | None
) -> bool:
    """The answer's losses are those of training with ``factor`` times the learning rate."""
    if answer.tensor is None or tol is None:
        return False
    g = case.graph
    params = {k: g[k] for k in case.exercise.parameters}
    losses = autograd_training(
        case.exercise.pass_lines, params, g["Xbs"], g["Ybs"], factor * g["lr"]
    )
    if answer.tensor.shape != losses.shape:
        return False
    return maxabs(as64(answer.tensor) - losses) <= tol


def _shift_pattern(ev: Evidence) -> Diagnosis | None:
    """Right in every case but those whose values were shifted one way (near-constant features,
    large logits): the answer handles the usual values only."""
    failing = [c for c, v in zip(ev.cases, ev.verdicts, strict=True) if not v.passed]
    shifts = {c.spec.shift for c in failing}
    if len(shifts) != 1 or "none" in shifts:
        return None
    key = {"near-constant": "wrong-value.epsilon", "large-logits": "wrong-value.overflow"}
    return say(ev.exercise, ev.step, key[shifts.pop()])


def _shape_error(answer: Answer | None) -> bool:
    """An exception about sizes: shapes that do not broadcast, or an index past the end."""
    text = (answer.error or "") if answer is not None and answer.kind == "error" else ""
    return any(w in text for w in ("shape", "size", "dimension", "out of bounds"))


def _no_tensor(ev: Evidence) -> Diagnosis | None:
    """No tensor to compare in some case: an exception, no assignment, or not a tensor."""
    ex, step = ev.exercise, ev.step
    ordered = [ev.answers[c.name] for c in ev.cases if c.name in ev.answers]
    for a in ordered:
        if a.kind in ("error", "not-implemented"):
            text = (a.error or "an exception").splitlines()[0][:200]
            kind, _, detail = text.partition(": ")
            where = f" on line {a.lineno} of your cell" if a.lineno else ""
            return say(
                ex,
                step,
                "error",
                kind=kind,
                where=where,
                detail=f" ({detail})" if detail else "",
                hint=_error_hint(ev, kind, text),
            )
    for a in ordered:
        if a.kind == "missing":
            return say(ex, step, "unassigned")
        if a.kind in ("other", "number", "too-large"):
            what = {"number": "a plain number", "too-large": "a huge tensor"}.get(a.kind)
            return say(ex, step, "not-a-tensor", what=what or f"a `{a.type_name}`")
    return None


def _error_hint(ev: Evidence, kind: str, text: str) -> str:
    """What an exception usually means in an answer, in words (or "")."""
    ex, step = ev.exercise, ev.step
    if "cannot be multiplied" in text:
        return hint(ex, step, "error.matmul")
    if "must match the size" in text or "broadcast shape" in text:
        return hint(ex, step, "error.broadcast")
    lowered = text.lower()
    if kind == "MemoryError" or "allocate memory" in lowered or "out of memory" in lowered:
        return hint(ex, step, "error.memory", limit=ev.memory_limit)
    if kind in ("ImportError", "ModuleNotFoundError") and "not loaded yet" in text:
        return hint(ex, step, "error.import")
    if kind == "NameError":
        missing = text.split("'")[1] if text.count("'") >= 2 else ""
        if missing == step.name:
            return hint(ex, step, "error.not-reset")
        if missing in {s.name for s in ex.steps}:
            return hint(ex, step, "error.name")
        near = difflib.get_close_matches(missing, sorted(ex.provided), n=1, cutoff=0.75)
        out = hint(ex, step, "error.name-other", missing=missing or "that name")
        return out + (hint(ex, step, "error.name-near", near=near[0]) if near else "")
    return ""


def _wrong_shape(ev: Evidence) -> Diagnosis | None:
    """The answer has another shape than its variable in some case (see ``shape_slip``)."""
    ex, step = ev.exercise, ev.step
    bad = [
        (c, t, _tol(c, step))
        for c, v in zip(ev.cases, ev.verdicts, strict=True)
        if v.status == "shape-mismatch" and (t := _tensor(ev, c)) is not None
    ]
    if not bad:
        return None
    case, got, tol = bad[0]
    ref = case.reference(step)
    want = _shape(ref.shape)
    found = f"`{step.name}` has shape {_shape(got.shape)} but `{step.var}` has shape {want}"
    if all(transposed_match(t, c.reference(step), tl) for c, t, tl in bad):
        return say(ex, step, "transposed", found=found, want=want)
    if not is_lecture_size(case):  # right shape at the lecture's sizes, not at others
        return say(ex, step, "shape.sizes", found=found)
    slip = shape_slip(got.shape, ref.shape)
    before = next((u for u in step.consumers if case.graph[u].shape == got.shape), None)
    if slip == "reshaped" and not reshape_match(got, ref, tol):
        slip = "other"
    elif slip == "reshaped" and before is not None:
        slip = "view"
    elif slip == "summed" and before is not None:  # the consumer's shape: a sum not undone
        slip = "not-broadcast"
    d = say(ex, step, f"shape.{slip}", found=found, ndim=ref.dim(), before=before)
    if all(broadcast_match(t, c.reference(step), tl) for c, t, tl in bad):
        d = Diagnosis(d.code, d.message + TEXT["shape.cmp"])
    return d


def _wrong_values(ev: Evidence) -> Diagnosis:
    """Right shape in every case, wrong values in some."""
    ex, step = ev.exercise, ev.step
    if step.scatter is not None:
        scatter = scatter_drops_duplicates(ev)
        if scatter is not None:
            return scatter
    failing = []
    for case, v in zip(ev.cases, ev.verdicts, strict=True):
        t = _tensor(ev, case)
        if not v.passed and t is not None and v.tolerance is not None:
            failing.append((case, t, v.tolerance))
    found = relation(step, failing)
    terms = {t.label: t.words for t in step.terms}
    if found is not None and found.branch in terms:
        key = {"missing-branch": "missing-branch.term", "sign-flip": "sign-flip.term"}.get(
            found.kind, "wrong-scale.term"
        )
        scale = TEXT[f"scale.{found.factor}"] if found.factor else ""
        return say(ex, step, key, term=terms[found.branch], scale=scale)
    if found is not None:
        if found.branch in USES:
            key = f"{found.kind}.use"
            path = {"position": "one position of the context", "example": "one example"}[
                found.branch
            ]
        else:
            key = found.kind + (
                ".branch" if found.branch and found.kind != "missing-branch" else ""
            )
            path = path_of(ex, step, found.branch) if found.branch else ""
        scale = TEXT[f"scale.{found.factor}"] if found.factor else ""
        return say(ex, step, key, path=path, scale=scale)
    for case, t, tol in failing:
        factor = missing_factor(case, step, t, tol)
        if factor is not None:
            kind, name = factor
            return say(ex, step, f"wrong-scale.{kind}-factor", factor=name)
        break  # the first failing case decides: a factor is the same in every case
    return _upstream_pattern(ev) or say(ex, step, "wrong-value")


def _upstream_pattern(ev: Evidence) -> Diagnosis | None:
    """Right at the true upstream gradient only (``upstream-shortcut``), or the same answer for
    two upstream gradients that lead to different references (``ignores-upstream``).

    A shortcut that still reads the upstream gradients (the two lecture-size answers differ)
    while one branch ``r_i`` is negligible wherever the answer passes (``max |r_i| <= FLOOR *
    tol``) and not wherever it fails is blamed on that branch: the true gradient hid it."""
    ex, step, pairs = ev.exercise, ev.step, list(zip(ev.cases, ev.verdicts, strict=True))
    same_size = [c for c in ev.cases if is_lecture_size(c)]
    if len(same_size) < 2:  # pragma: no cover - the plan always has both lecture-size cases
        return None
    a, b = (_tensor(ev, c) for c in same_size[:2])
    same = a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)
    if any(c.true_upstream and v.passed for c, v in pairs) and any(
        not c.true_upstream and not v.passed for c, v in pairs if c in same_size
    ):
        if all(
            t is not None and maxabs(as64(t)) == 0.0 for t in (_tensor(ev, c) for c in ev.cases)
        ):
            return say(ex, step, "upstream-shortcut.zero")
        for label in step.consumers if len(step.consumers) > 1 and not same else ():
            small = [
                maxabs(c.branches(step)[label]) <= FLOOR * (v.tolerance or 0.0) for c, v in pairs
            ]
            if all(s == v.passed for s, (_, v) in zip(small, pairs, strict=True)):
                return say(ex, step, "upstream-shortcut.branch", path=path_of(ex, step, label))
        return say(ex, step, "upstream-shortcut")
    gap = maxabs(same_size[0].reference(step) - same_size[1].reference(step))
    if step.upstream and same and gap > _tol(same_size[0], step):
        return say(ex, step, "ignores-upstream")
    return None


def scatter_drops_duplicates(ev: Evidence) -> Diagnosis | None:
    """dC wrong only on rows the batch uses more than once, in every failing case: the update
    ``dC[Xb] += demb`` (fancy-index assignment applies a repeated index once), or ``=`` in a
    loop, which keeps only the last use."""
    seen_any = False
    for case, verdict in zip(ev.cases, ev.verdicts, strict=True):
        if verdict.passed:
            continue
        if verdict.status != "wrong-value" or verdict.tolerance is None:
            return None
        wrong, repeated = wrong_rows(case, ev.step, ev.answers[case.name], verdict.tolerance)
        if not wrong or not wrong <= repeated:
            return None
        seen_any = True
    return say(ev.exercise, ev.step, "scatter-drops-duplicates") if seen_any else None


def blame_gradients(ex: Exercise, step: Step, failed: list[str]) -> Diagnosis:
    """A training step's first diagnosis when some of the gradient cells it runs are wrong."""
    names = ", ".join(f"`{n}`" for n in failed)
    one = len(failed) == 1
    return say(
        ex,
        step,
        "training.upstream",
        failed=names,
        verb="is" if one else "are",
        them="it" if one else "them",
    )


__all__ = ["Evidence", "autograd_names", "blame_gradients", "diagnose", "wrong_rows"]

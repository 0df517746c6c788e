"""Diagnoses: what a failing step did wrong, in a teacher's words, found from evidence.

A diagnosis has a stable kebab-case code (``CODES``) and one or two sentences (``TEXT``) saying
what was found, what was expected and how to fix it. Messages never contain reference values or
solution code: they name shapes, variables and ideas (``keepdim``, ``+=``, ``.clone()``, Bessel's
``n-1``), not numbers.

Evidence comes from the answers themselves, compared with the reference across the hidden cases
(:mod:`autograder.evidence` holds the tests and their math); the source only supports (the
autograd names it uses, the size literals it writes, a ``one_hot`` without ``num_classes``). The
order in which :func:`diagnose` looks, for a failing step:

1. nothing to grade: ``missing-cell``, ``timeout``, ``error`` (no result), ``not-implemented``;
2. what blocks a pass whatever the values: ``uses-autograd``, ``tampering`` (frames, ``gc``,
   ``ctypes`` or the grader's own modules), ``in-place-mutation``;
3. the pattern over cases: right at every case with the lecture's sizes and wrong at another size
   is ``hard-coded-size``, as is a ``one_hot`` whose width depends on the batch;
4. no tensor to compare: ``error`` (type and line of the exception), ``not-a-tensor``;
5. the wrong shape: ``transposed`` when the values are the transpose, else ``shape-mismatch``
   (a missing or extra ``keepdim``, a view not undone, a broadcast ``cmp`` would have hidden);
6. the right shape, wrong values: ``scatter-drops-duplicates`` (dC), then the fitted relations
   ``sign-flip``, ``missing-branch``, ``wrong-scale``; then the pattern over upstream gradients,
   ``upstream-shortcut`` (right at the true upstream gradient only) and ``ignores-upstream``
   (the same answer whatever the upstream gradient); else ``wrong-value``.

Exactly one diagnosis comes from steps 3-6, after those of step 2; ``dtype-mismatch`` is added
last as a note and never fails a step by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .cases import Case
from .catalog import Step
from .evidence import (
    FLOOR,
    LECTURE_SIZES,
    USES,
    as64,
    autograd_names,
    broadcast_match,
    is_lecture_size,
    maxabs,
    one_hot_without_classes,
    relation,
    reshape_match,
    shape_slip,
    size_literals,
    tamper_names,
    transposed_match,
    wrong_rows,
)
from .results import CaseResult, Diagnosis
from .sandbox import Outcome
from .worker import Answer

CODES: tuple[str, ...] = (
    *("missing-cell", "not-implemented", "error", "timeout", "not-a-tensor", "shape-mismatch"),
    *("dtype-mismatch", "uses-autograd", "hard-coded-size", "upstream-shortcut"),
    *("ignores-upstream", "missing-branch", "in-place-mutation", "sign-flip", "wrong-scale"),
    *("transposed", "scatter-drops-duplicates", "wrong-value", "tampering"),
)
"""Every code :func:`diagnose` gives. They are stable: reports and courses key on them."""

TEXT: dict[str, str] = {
    "timeout": "Your code for {name} did not finish in time (it was stopped after about "
    "{seconds} s); look for a loop that never ends or a very large tensor.",
    "no-result": "Your code for {name} could not be run to the end: {problem}.",
    "not-implemented": "{name} is not implemented yet: replace `raise NotImplementedError()` "
    "with your code.",
    "uses-autograd": "Your code for {name} uses {used}: the point is to derive the gradient by "
    "hand with the chain rule, so no autograd in answers.",
    "tampering": "Your code for {name} reaches into the interpreter or the grader ({used}) "
    "instead of computing the gradient; an answer may only compute with the tensors it is given.",
    "in-place-mutation": "Your code for {name} changed {what} in place, so every later use sees "
    "the changed values. Start from a copy (`.clone()`) before adding to it with `+=`.",
    "one-hot": "`F.one_hot` without `num_classes` makes only as many columns as the largest "
    "index in the batch needs, so its width changes from batch to batch; pass `num_classes` "
    "(the number of columns of `{var}`, read from its shape).",
    "hard-coded-size": "`{name}` is right at the lecture's sizes but {how} when the batch or the "
    "network has other sizes{literals}. Read sizes from `n`, `vocab_size`, `block_size`, "
    "`n_embd`, `n_hidden` or the tensors' `.shape` instead of writing numbers in.",
    "error": "Your code for {name} raised {kind}{where}{detail}.{hint}",
    "error.matmul": " Check the shapes of the two factors of `@`: the gradient has the shape of "
    "`{var}`, and that decides which factor is transposed and in which order.",
    "error.broadcast": " Two tensors' shapes do not broadcast: check which dimension each sum ran "
    "over and whether it kept it (`keepdim`).",
    "error.name": " A step is graded on its own: it sees the forward tensors, the sizes and its "
    "upstream gradients ({ups}), not the other gradients you computed.",
    "unassigned": "Your cell never assigns `{name}`; store the gradient in a variable called "
    "`{name}`.",
    "not-a-tensor": "`{name}` should be a torch tensor with the shape of `{var}`, but your code "
    "produced {what}.",
    "transposed": "{found}, and its values are the transpose of the right ones: the factors of "
    "the product are in the wrong order (or one transpose too many). A gradient has its "
    "variable's shape, so order the product to give {want}.",
    "shape.missing-keepdim": "{found}: the sum dropped the dimension it ran over; sum with "
    "`keepdim=True` so the gradient keeps the shape of its variable.",
    "shape.extra-keepdim": "{found}: the sum kept a dimension that the {ndim}-dimensional "
    "`{var}` does not have, so sum without `keepdim` here.",
    "shape.not-summed": "{found}: `{var}` was broadcast along the dimension where it has size 1, "
    "so its gradient sums over that dimension (keeping it).",
    "shape.wrong-dim": "{found}: the sum ran over the wrong dimension; `{var}` was broadcast "
    "along the dimension where it has size 1, so sum over that one.",
    "shape.summed": "{found}: `{var}` was not broadcast in the forward pass, so nothing is summed "
    "over that dimension; keep the full shape.",
    "shape.view": "{found}; it still has the shape of `{before}`: the view of the forward pass is "
    "not undone. Reshape to `{var}`'s shape, read from `{var}.shape` rather than written in.",
    "shape.reshaped": "{found}; the numbers are right but arranged in the wrong shape. Reshape to "
    "`{var}`'s shape, read from `{var}.shape` rather than written in.",
    "shape.other": "{found}; a gradient always has exactly the shape of its variable. Check which "
    "dimensions each sum ran over and the order of the factors of each product.",
    "shape.sizes": "{found} when the batch or the network has other sizes (at the lecture's "
    "sizes the shape is right): read sizes from `n`, `vocab_size`, `block_size`, `n_embd`, "
    "`n_hidden` or the tensors' `.shape` instead of writing numbers in.",
    "shape.cmp": " The lecture's `cmp` would broadcast the two and call it right, but a gradient "
    "must have exactly its variable's shape.",
    "scatter-drops-duplicates": "dC is right on every row of C the batch uses once and wrong on "
    "exactly the rows it uses several times: an indexed `+=` with repeated indices (or `=` in a "
    "loop) keeps only one of the updates. Accumulate every use, with a loop over the batch that "
    "adds each row's share, or a scatter-add such as `index_add_`.",
    "sign-flip": "`{name}` has the right magnitude everywhere but the opposite sign: a minus sign "
    "is missing or doubled in the local derivative of {lines}.",
    "sign-flip.use": "`dC` has the wrong sign for {path}: check the sign there.",
    "sign-flip.branch": "The contribution to `{name}` through {path} has the wrong sign, while "
    "the other path is right: check the sign of that local derivative.",
    "missing-branch": "`{name}` holds only part of the gradient: the path through {path} is "
    "missing. `{var}` is used by {lines}; add every path's contribution (`+=`, not `=`).",
    "missing-branch.use": "`dC` misses the uses of `C` by {path}: every position of every "
    "example sends its row of `demb` back into `C`, so the loops must cover all of them.",
    "wrong-scale": "`{name}` is {scale}.",
    "wrong-scale.branch": "The contribution to `{name}` through {path} is {scale}; the other path "
    "is right.",
    "scale.bessel": "too small by the factor (n-1)/n: the variance uses Bessel's correction, so "
    "divide by `n-1`, not by `n`",
    "scale.bessel-inverse": "too large by the factor n/(n-1): this line divides by `n`, not `n-1`",
    "scale.missing-1/n": "`n` times too large: a factor `1/n` is missing (a mean divides by `n`)",
    "scale.extra-1/n": "`n` times too small: there is one `1/n` too many (no mean on this path)",
    "scale.missing-1/(n-1)": "`n-1` times too large: the variance's factor `1/(n-1)` is missing",
    "scale.double": "twice too large: a factor 2 is counted twice, or a contribution added twice",
    "scale.half": "half the right size: a factor 2 is missing (the derivative of `x**2` is `2*x`)",
    "scale.constant": "off by a constant factor: check every constant in the local derivative",
    "upstream-shortcut": "`{name}` is right at the true upstream gradient of this loss but wrong "
    "when the grader passes other upstream gradients. Write the chain rule itself: {chain}.",
    "upstream-shortcut.branch": "`{name}` is right at the true upstream gradient, where the "
    "path through {path} carries almost nothing, and wrong wherever that path matters: re-derive "
    "its local derivative, the other path is right.",
    "upstream-shortcut.zero": "`{name}` is all zeros: close to the true gradient here, which "
    "cancels to almost nothing, but wrong when the grader passes other upstream gradients. Write "
    "the chain rule itself: {chain}.",
    "ignores-upstream": "`{name}` comes out the same whatever {ups} holds, so it cannot be the "
    "chain rule: {chain}.",
    "wrong-value": "`{name}` has the right shape but wrong values, and no single slip explains "
    "them: re-derive {chain}.",
    "dtype-mismatch": "`{name}` is {dtype} while `{var}` is float32; the values are graded all "
    "the same, but a gradient normally keeps its variable's dtype.",
}
"""The messages, by code or ``code.variant``; fields are filled in by :func:`_say`."""


ALIASES = {
    "one-hot": "hard-coded-size",
    "no-result": "error",
    "unassigned": "error",
    "shape": "shape-mismatch",
}
"""Message keys whose code is not their first part."""


@dataclass
class Evidence:
    """Everything known about one step of one submission."""

    step: Step
    code: str | None  # the answer cell, None if it is missing
    cases: list[Case]
    answers: dict[str, Answer]  # case name -> what the code produced there
    verdicts: list[CaseResult]  # one per case, in case order
    outcome: Outcome | None  # the worker's outcome (None when nothing was run)
    problem: str | None  # why there are no answers, if that is known


def _fields(step: Step) -> dict[str, str]:
    """What every message of a step may name: the step, its variable, lines and upstreams."""
    lines = " and ".join(f"`{line}`" for line in step.consumer_lines)
    ups = " and ".join(f"`{u}`" for u in step.upstream) or "the upstream gradient"
    if not step.upstream:
        chain = f"the derivative of {lines}"
    elif len(step.consumers) == 1:
        chain = f"the local derivative of {lines} times {ups}"
    else:
        chain = (
            f"for each of {lines}, the local derivative times that line's upstream "
            f"gradient ({', '.join(f'`{u}`' for u in step.upstream)}), summed"
        )
    return {"name": step.name, "var": step.var, "lines": lines, "ups": ups, "chain": chain}


def _say(step: Step, key: str, **fields: Any) -> Diagnosis:
    """The diagnosis ``TEXT[key]`` for ``step``; its code is ``key`` up to the first dot, or
    what ``ALIASES`` says."""
    family = key.split(".")[0]
    code = ALIASES.get(key) or ALIASES.get(family) or family
    return Diagnosis(code, TEXT[key].format(**{**_fields(step), **fields}))


def _shape(shape: torch.Size | list[int] | tuple[int, ...]) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _tensor(ev: Evidence, case: Case) -> torch.Tensor | None:
    answer = ev.answers.get(case.name)
    return answer.tensor if answer is not None else None


def _tol(case: Case, step: Step) -> float:
    """The engine's tolerance for a case (the verdicts carry it only for right-shaped answers)."""
    from .engine import RTOL

    return RTOL * case.scale(step)


def diagnose(ev: Evidence) -> list[Diagnosis]:
    """The diagnoses of one step, most telling first; empty for a correct answer."""
    step = ev.step
    if ev.code is None:
        return [
            Diagnosis("missing-cell", ev.problem or f"The answer cell for {step.name} is missing.")
        ]
    if ev.outcome is not None and ev.outcome.status == "timeout":
        return [_say(step, "timeout", seconds=max(1, round(ev.outcome.seconds)))]
    if not ev.answers:
        return [_say(step, "no-result", problem=ev.problem)]
    if all(a.kind == "not-implemented" for a in ev.answers.values()):
        return [_say(step, "not-implemented")]

    out: list[Diagnosis] = []
    names = autograd_names(ev.code)
    if names or any(a.autograd for a in ev.answers.values()):
        out.append(
            _say(step, "uses-autograd", used=", ".join(f"`{n}`" for n in names) or "autograd")
        )
    tampered = tamper_names(ev.code)
    if tampered:
        out.append(_say(step, "tampering", used=", ".join(f"`{n}`" for n in tampered)))
    known = set(ev.cases[0].graph) | set(step.upstream)  # names, not text from the worker
    mutated = sorted({m for a in ev.answers.values() for m in a.mutated if m in known})
    if mutated:
        out.append(_say(step, "in-place-mutation", what=", ".join(f"`{m}`" for m in mutated)))
    if not all(v.passed for v in ev.verdicts):
        try:
            out.append(_hard_coded(ev) or _no_tensor(ev) or _wrong_shape(ev) or _wrong_values(ev))
        except Exception:  # pragma: no cover - a diagnosis must never stop the grading
            out.append(_say(step, "wrong-value"))
    first = ev.answers.get(ev.cases[0].name)
    if first is not None and first.tensor is not None and first.tensor.dtype != torch.float32:
        out.append(
            _say(step, "dtype-mismatch", dtype=str(first.tensor.dtype).removeprefix("torch."))
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
        return _say(step, "one-hot")
    other_bad = [(c, v) for c, v in pairs if not is_lecture_size(c) and not v.passed]
    if not other_bad or not all(v.passed for c, v in pairs if is_lecture_size(c)):
        return None
    case, verdict = other_bad[0]
    answer = ev.answers.get(case.name)
    if answer is not None and answer.kind == "error":
        how = f"raised {(answer.error or 'an exception').split(':')[0]}"
        how += f" on line {answer.lineno}" if answer.lineno else ""
    else:
        how = "has the wrong shape" if verdict.status == "shape-mismatch" else "has wrong values"
    found = ", ".join(f"{v} for `{LECTURE_SIZES[v]}`" for v in size_literals(ev.code or ""))
    return _say(
        step, "hard-coded-size", how=how, literals=f" (your code writes {found})" if found else ""
    )


def _shape_error(answer: Answer | None) -> bool:
    """An exception about sizes: shapes that do not broadcast, or an index past the end."""
    text = (answer.error or "") if answer is not None and answer.kind == "error" else ""
    return any(w in text for w in ("shape", "size", "dimension", "out of bounds"))


def _no_tensor(ev: Evidence) -> Diagnosis | None:
    """No tensor to compare in some case: an exception, no assignment, or not a tensor."""
    step = ev.step
    ordered = [ev.answers[c.name] for c in ev.cases if c.name in ev.answers]
    for a in ordered:
        if a.kind in ("error", "not-implemented"):
            text = (a.error or "an exception").splitlines()[0][:200]
            kind, _, detail = text.partition(": ")
            hint = ""
            if "cannot be multiplied" in text:
                hint = "error.matmul"
            elif "must match the size" in text or "broadcast shape" in text:
                hint = "error.broadcast"
            elif kind == "NameError":
                hint = "error.name"
            where = f" on line {a.lineno} of your cell" if a.lineno else ""
            return _say(
                step,
                "error",
                kind=kind,
                where=where,
                detail=f" ({detail})" if detail else "",
                hint=TEXT[hint].format(**_fields(step)) if hint else "",
            )
    for a in ordered:
        if a.kind == "missing":
            return _say(step, "unassigned")
        if a.kind in ("other", "number", "too-large"):
            what = {"number": "a plain number", "too-large": "a huge tensor"}.get(a.kind)
            return _say(step, "not-a-tensor", what=what or f"a `{a.type_name}`")
    return None


def _wrong_shape(ev: Evidence) -> Diagnosis | None:
    """The answer has another shape than its variable in some case (see ``shape_slip``)."""
    step = ev.step
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
        return _say(step, "transposed", found=found, want=want)
    if not is_lecture_size(case):  # right shape at the lecture's sizes, not at others
        return _say(step, "shape.sizes", found=found)
    slip = shape_slip(got.shape, ref.shape)
    before = next((u for u in step.consumers if case.graph[u].shape == got.shape), None)
    if slip == "reshaped" and not reshape_match(got, ref, tol):
        slip = "other"
    elif slip == "reshaped" and before is not None:
        slip = "view"
    d = _say(step, f"shape.{slip}", found=found, ndim=ref.dim(), before=before)
    if all(broadcast_match(t, c.reference(step), tl) for c, t, tl in bad):
        d = Diagnosis(d.code, d.message + TEXT["shape.cmp"])
    return d


def _wrong_values(ev: Evidence) -> Diagnosis:
    """Right shape in every case, wrong values in some."""
    step = ev.step
    if step.var == "C":
        scatter = scatter_drops_duplicates(ev)
        if scatter is not None:
            return scatter
    failing = []
    for case, v in zip(ev.cases, ev.verdicts, strict=True):
        t = _tensor(ev, case)
        if not v.passed and t is not None and v.tolerance is not None:
            failing.append((case, t, v.tolerance))
    found = relation(step, failing)
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
            path = _path(step, found.branch) if found.branch else ""
        scale = TEXT[f"scale.{found.factor}"] if found.factor else ""
        return _say(step, key, path=path, scale=scale)
    return _upstream_pattern(ev) or _say(step, "wrong-value")


def _upstream_pattern(ev: Evidence) -> Diagnosis | None:
    """Right at the true upstream gradient only (``upstream-shortcut``), or the same answer for
    two upstream gradients that lead to different references (``ignores-upstream``).

    A shortcut that still reads the upstream gradients (the two lecture-size answers differ)
    while one branch ``r_i`` is negligible wherever the answer passes (``max |r_i| <= FLOOR *
    tol``) and not wherever it fails is blamed on that branch: the true gradient hid it."""
    step, pairs = ev.step, list(zip(ev.cases, ev.verdicts, strict=True))
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
            return _say(step, "upstream-shortcut.zero")
        for label in step.consumers if len(step.consumers) > 1 and not same else ():
            small = [
                maxabs(c.branches(step)[label]) <= FLOOR * (v.tolerance or 0.0) for c, v in pairs
            ]
            if all(s == v.passed for s, (_, v) in zip(small, pairs, strict=True)):
                return _say(step, "upstream-shortcut.branch", path=_path(step, label))
        return _say(step, "upstream-shortcut")
    gap = maxabs(same_size[0].reference(step) - same_size[1].reference(step))
    if step.upstream and same and gap > _tol(same_size[0], step):
        return _say(step, "ignores-upstream")
    return None


def _path(step: Step, consumer: str) -> str:
    return f"`{dict(zip(step.consumers, step.consumer_lines, strict=True))[consumer]}`"


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
    return _say(ev.step, "scatter-drops-duplicates") if seen_any else None


__all__ = ["CODES", "TEXT", "Evidence", "autograd_names", "diagnose", "wrong_rows"]

"""Diagnoses: what a failing step did wrong, in a teacher's words, found from evidence.

A diagnosis has a stable kebab-case code and one or two sentences saying what was found, what
was expected and how to fix it. Messages never contain reference values or solution code: they
name shapes, variables and ideas (``keepdim``, ``+=``, Bessel's correction), not numbers.

Evidence comes first from the answers themselves, compared across the hidden cases (an answer
right at the lecture sizes only, or at the true upstream gradient only), and from the code's
source only as support (the names it uses).
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

import torch

from .cases import Case
from .catalog import Step
from .results import CaseResult, Diagnosis
from .sandbox import Outcome
from .worker import Answer


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


AUTOGRAD_NAMES = frozenset({
    "grad", "backward", "autograd", "retain_grad", "requires_grad", "requires_grad_",
    "enable_grad", "set_grad_enabled", "grad_fn", "functorch", "vjp", "jacrev", "jacobian",
})


def autograd_names(code: str) -> list[str]:
    """Names of autograd machinery the code mentions (comments and strings ignored)."""
    found: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME and tok.string in AUTOGRAD_NAMES and tok.string not in found:
                found.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


def _shape(shape: torch.Size | list[int] | tuple[int, ...]) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _d(code: str, message: str) -> Diagnosis:
    return Diagnosis(code=code, message=message)


def diagnose(ev: Evidence) -> list[Diagnosis]:
    """The diagnoses of one step, most telling first; empty for a correct answer."""
    step, out = ev.step, []
    name = step.name
    first = ev.answers.get(ev.cases[0].name)

    if ev.code is None:
        return [_d("missing-cell", ev.problem or f"The answer cell for {name} is missing.")]
    if ev.outcome is not None and ev.outcome.status == "timeout":
        return [_d("timeout", f"Your code for {name} did not finish in time ({ev.outcome.detail}); "
                   "look for a loop that never ends or a very large tensor.")]
    if not ev.answers:
        return [_d("error", f"Your code for {name} could not be run to the end: {ev.problem}.")]
    if all(a.kind == "not-implemented" for a in ev.answers.values()):
        return [_d("not-implemented", f"{name} is not implemented yet: replace "
                   "`raise NotImplementedError()` with your code.")]

    names = autograd_names(ev.code)
    if names or any(a.autograd for a in ev.answers.values()):
        used = ", ".join(f"`{n}`" for n in names) or "autograd"
        out.append(_d("uses-autograd", f"Your code for {name} uses {used}: the point is to derive "
                      "the gradient by hand with the chain rule, so no autograd in answers."))
    mutated = sorted({m for a in ev.answers.values() for m in a.mutated})
    if mutated:
        out.append(_d("in-place-mutation", f"Your code for {name} changed {', '.join(mutated)} in "
                      "place; later cells would see the changed values. Start from a copy "
                      "(`.clone()`) before adding to it."))

    errors = [a for a in ev.answers.values() if a.kind in ("error", "not-implemented")]
    if errors:
        a = errors[0]
        where = f" on line {a.lineno} of the cell" if a.lineno else ""
        out.append(_d("error", f"Your code for {name} raised {a.error}{where}."))
        return out
    if first is not None and first.kind == "missing":
        out.append(_d("error", f"Your cell never assigns `{name}`; store the gradient in a "
                      f"variable called `{name}`."))
        return out
    if first is not None and first.kind in ("other", "number", "too-large"):
        what = first.type_name or ("a plain number" if first.kind == "number" else "a huge tensor")
        out.append(_d("not-a-tensor", f"`{name}` should be a torch tensor with the shape of "
                      f"`{step.var}`, but your code produced {what}."))
        return out

    shape_bad = [v for v in ev.verdicts if v.status == "shape-mismatch"]
    if shape_bad:
        case = next(c for c in ev.cases if c.name == shape_bad[0].case)
        got = ev.answers[case.name].tensor
        want = case.reference(step).shape
        if got is not None:
            out.append(_d("shape-mismatch", f"`{name}` has shape {_shape(got.shape)} but "
                          f"`{step.var}` has shape {_shape(want)}; a gradient has exactly the shape "
                          "of its variable (check `keepdim`, and undo any reshape)."))
        return out

    if first is not None and first.tensor is not None and first.tensor.dtype != torch.float32:
        out.append(_d("dtype-mismatch", f"`{name}` is {str(first.tensor.dtype).removeprefix('torch.')}"
                      f" while `{step.var}` is float32; this costs nothing, but keep the dtype."))

    if not all(v.passed for v in ev.verdicts) and step.var == "C":
        scatter = scatter_drops_duplicates(ev)
        if scatter is not None:
            out.append(scatter)
            return out
    if not all(v.passed for v in ev.verdicts):
        out.append(_d("wrong-value", f"`{name}` has the right shape but wrong values: re-derive the "
                      f"local derivative of {' and '.join(step.consumer_lines)} and multiply by the "
                      "upstream gradient."))
    return out


def wrong_rows(case: Case, step: Step, answer: Answer, tol: float) -> tuple[set[int], set[int]]:
    """Rows of an answer for dC that differ from the reference, and the rows the batch repeats."""
    ref = case.reference(step)
    if answer.tensor is None or answer.tensor.shape != ref.shape:
        return set(), set()
    per_row = (answer.tensor.to(torch.float64) - ref).abs().amax(dim=1)  # (vocab_size,)
    wrong = {int(r) for r in torch.nonzero(~(per_row <= tol)).flatten()}
    repeated = {int(r) for r in torch.nonzero(case.row_uses() > 1).flatten()}
    return wrong, repeated


def scatter_drops_duplicates(ev: Evidence) -> Diagnosis | None:
    """dC wrong only on rows the batch uses more than once, in every failing case: the update
    ``dC[Xb] += demb`` (fancy-index assignment applies a repeated index once)."""
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
    if not seen_any:
        return None
    return _d("scatter-drops-duplicates", "dC is right on every row of C the batch uses once and "
              "wrong on exactly the rows it uses several times: an indexed `+=` with repeated indices "
              "applies only one of the updates. Accumulate every use, with a loop over the batch "
              "that adds each row's share, or a scatter-add such as `index_add_`.")

"""Evidence tests for diagnoses: pure functions of tensors (and, as support only, of source text).

Every test compares a student's answer ``a`` (any float dtype, compared in float64) with the
float64 reference ``r`` of one case, within that case's tolerance ``tol`` (the engine's
``RTOL * scale``). They run in the trusted parent and only for failing steps, so they may be
thorough but stay cheap: a few reductions over tensors of at most a few thousand elements.

The central test is a least-squares fit of one scalar. For a target ``t`` and a base ``b``
(zero unless stated),

    c* = <a - b, t> / <t, t>,     accepted when   max |a - b - c* t|  <=  tol * max(1, |c*|)

and ``t`` is not negligible (``max |t| > FLOOR * tol``: a target that is ~0 in a case says
nothing about a factor there). With ``t = r`` this recognises a flipped sign (``c* = -1``) and a
wrong scale (``c*`` a constant, or a function of the batch size ``n`` such as ``(n-1)/n``). With
``t = r_i`` the term of one consumer (one *branch* of the chain rule) and ``b = r - r_i``, it
recognises a missing branch (``c* = 0``), a branch with the wrong sign (``c* = -1``) and a branch
with the wrong factor.
"""

from __future__ import annotations

import math
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..core.cases import Case
from ..core.portable import (
    FLOOR,
    as64,
    bound_names,
    broadcast_shape,
    close,
    factor_name,
    fit_factor,
    maxabs,
    own_functions,
    tokens,
    without_harmless_autograd,
)
from ..core.portable import tamper_names as portable_tamper_names
from ..core.portable import wrong_rows as portable_wrong_rows
from ..exercises.definition import LECTURE, Step
from ..grading.answers import Answer

MAX_BROADCAST = 1 << 20
"""The largest broadcast :func:`broadcast_match` materialises (answers come from untrusted code,
and a broadcast of two shapes can be far larger than either)."""


def _lecture_sizes() -> dict[int, str]:
    sizes = LECTURE.sizes()
    named = {value: name for name, value in sizes.items()}
    named[sizes["block_size"] * sizes["n_embd"]] = "block_size * n_embd"
    named[sizes["n"] - 1] = "n - 1"
    named[sizes["n"] * sizes["block_size"]] = "n * block_size"
    return named


LECTURE_SIZES: dict[int, str] = _lecture_sizes()
"""Integer literals that stand for a size at the lecture's configuration, and what they mean
(the sizes of :data:`autograder.exercises.definition.LECTURE`)."""


def broadcast_match(answer: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    """The answer has another shape, yet broadcasting the two together makes them agree: the
    lecture's ``cmp`` (``torch.allclose`` broadcasts) would have reported it as right."""
    if answer.shape == ref.shape:
        return False
    shape = broadcast_shape(answer.shape, ref.shape)
    if shape is None or math.prod(shape) > MAX_BROADCAST:  # (2**24, 1) against (1, 64)
        return False
    return maxabs(as64(answer).expand(shape) - ref.expand(shape)) <= tol


def reshape_match(answer: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    """The right numbers in the right order, in another shape (a view not undone)."""
    if answer.shape == ref.shape or answer.numel() != ref.numel():
        return False
    return maxabs(as64(answer).reshape(ref.shape) - ref) <= tol


USES = ("position", "example")
"""Labels of dC's terms: one use of C per position of the context, or per example of the batch."""


def branch_terms(case: Case, step: Step) -> list[tuple[str, torch.Tensor]]:
    """The terms whose sum is the reference, labelled, for the branch tests.

    For a step with several consumers: one term per consumer, labelled by the consumer. For a
    scatter into a table (dC: one consumer, ``emb = C[Xb]``, but one path per use of a row): the
    term of each position
    ``j`` of the context, ``P_j[v] = sum over i with Xb[i, j] = v of demb[i, j]``, labelled
    ``"position"``, and the term of each example ``i`` of the batch,
    ``E_i[v] = sum over j with Xb[i, j] = v of demb[i, j]``, labelled ``"example"``; so a loop
    that skips one position, or one example, leaves out a branch. A fused formula's named parts
    (``Step.terms``: the softmax and one-hot of the cross-entropy, the three paths of the batch
    norm) are its terms, labelled by name. Other single-path steps have no terms: their only
    "branch" is the whole reference.
    """
    if step.terms:
        return case.terms(step)
    if len(step.consumers) > 1:
        return list(case.branches(step).items())
    if step.scatter is None or not step.upstream:
        return []
    Xb, demb = case.graph[step.scatter.index], case.upstream[step.upstream[0]].double()
    if Xb.dim() != 2 or demb.dim() != 3:
        return []
    n, block = Xb.shape
    empty = torch.zeros(case.graph[step.var].shape[0], demb.shape[2], dtype=torch.float64)
    terms = [("position", empty.clone().index_add_(0, Xb[:, j], demb[:, j])) for j in range(block)]
    terms += [("example", empty.clone().index_add_(0, Xb[i], demb[i])) for i in range(n)]
    return terms


@dataclass(frozen=True)
class Relation:
    """How a wrong answer relates to the reference, the same way in every failing case.

    ``kind`` is ``"sign-flip"``, ``"missing-branch"`` or ``"wrong-scale"``; ``branch`` is the
    consumer whose term is changed (``"position"`` or ``"example"`` for one use of a row of C,
    see :data:`USES`), None when the whole answer is; ``factor`` names the wrong factor (see
    :func:`factor_name`) for wrong-scale.
    """

    kind: str
    branch: str | None = None
    factor: str | None = None


def relation(step: Step, failing: Sequence[tuple[Case, torch.Tensor, float]]) -> Relation | None:
    """The one simple change that turns the reference into the answer in every failing case.

    ``failing`` holds ``(case, answer, tol)`` for every failing case, each answer of the right
    shape. Tried in this order, each with :func:`fit_factor`:

    1. ``a = -r``: sign-flip of the whole answer;
    2. for each branch ``i`` (:func:`branch_terms`), ``a = (r - r_i) + c r_i``: ``c = 0`` is a
       missing branch, ``c = -1`` a branch with the wrong sign, a named ``c`` (``factor_name``,
       given each case's ``n``) a branch with the wrong factor;
    3. ``a = c r`` with a named ``c``: wrong-scale of the whole answer.

    None when no such change explains every failing case.
    """
    if not failing:
        return None
    whole = [fit_factor(a, case.reference(step), tol) for case, a, tol in failing]
    if all(f is not None and close(f, -1.0) for f in whole):
        return Relation("sign-flip")
    per_case = [branch_terms(case, step) for case, _, _ in failing]
    for label in dict.fromkeys(label for label, _ in per_case[0]):
        factors: list[tuple[float, int]] = []
        for (case, a, tol), terms in zip(failing, per_case, strict=True):
            ref = case.reference(step)
            mine = [t for lab, t in terms if lab == label]
            if all(maxabs(t) <= FLOOR * tol for t in mine):
                continue  # the branch is ~0 in this case: it says nothing about a factor
            fits = [fit_factor(a, t, tol, base=ref - t) for t in mine]
            good = [f for f in fits if f is not None]
            zero = [f for f in good if close(f, 0.0)]
            factors.append(((zero or good or [math.nan])[0], case.config.batch_size))
        if not factors:
            continue
        if all(close(f, 0.0) for f, _ in factors):
            return Relation("missing-branch", label)
        if all(close(f, -1.0) for f, _ in factors):
            return Relation("sign-flip", label)
        kind = factor_name(factors) if label not in USES else None
        if kind is not None:
            return Relation("wrong-scale", label, kind)
    if all(f is not None for f in whole):
        sizes = [case.config.batch_size for case, _, _ in failing]
        kind = factor_name([(f, n) for f, n in zip(whole, sizes, strict=True) if f is not None])
        if kind is not None:
            return Relation("wrong-scale", None, kind)
    return None


def wrong_rows(case: Case, step: Step, answer: Answer, tol: float) -> tuple[set[int], set[int]]:
    """Rows of an answer for a table (dC) that differ from the reference, and the rows the batch
    repeats."""
    if answer.tensor is None:
        return set(), set()
    return portable_wrong_rows(answer.tensor, case.reference(step), case.row_uses(step), tol)


def missing_factor(
    case: Case, step: Step, answer: torch.Tensor, tol: float
) -> tuple[str, str] | None:
    """A tensor ``X`` of the step's namespace such that the answer is the reference divided by
    it (``("missing", "X")``: a factor left out, such as ``bngain``) or multiplied by it
    (``("extra", "X")``). Only tensors that broadcast to the answer's shape and are not close to
    a constant are tried (a constant factor is a wrong scale, found elsewhere)."""
    ref = case.reference(step)
    if answer.shape != ref.shape:
        return None
    a = as64(answer)
    for name, value in case.graph64.items():
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() or name == step.var:
            continue
        shape = broadcast_shape(value.shape, ref.shape)
        if shape != tuple(ref.shape) or value.numel() < 2 or maxabs(value - value.mean()) < 1e-3:
            continue
        if bool((value.abs() < 1e-6).any()):
            continue
        times = fit_factor(a * value, ref, tol)
        if times is not None and close(times, 1.0):
            return "missing", name
        over = fit_factor(a / value, ref, tol)
        if over is not None and close(over, 1.0):
            return "extra", name
    return None


def is_lecture_size(case: Case) -> bool:
    """The case has the lecture's sizes (its upstream gradients may still be random)."""
    return case.spec.lecture_sizes


# ---------------------------------------------------------------------------------------------
# the source, as supporting evidence only


GRADER_NAMES = frozenset({"autograder", "ANSWERING", "_spied"})
"""The grader's own names (its package, the runner's checks): tampering too, beside
:data:`~autograder.core.portable.TAMPER_NAMES` (a notebook, which has no grader, leaves them)."""


def tamper_names(code: str) -> list[str]:
    """:func:`~autograder.core.portable.tamper_names`, the grader's own names too."""
    return portable_tamper_names(code, also=GRADER_NAMES)


AUTOGRAD_NAMES = frozenset(
    {"autograd", "backward", "retain_grad", "requires_grad", "requires_grad_", "enable_grad"}
    | {"set_grad_enabled", "grad_fn", "functorch"}
)
"""Names that mean autograd wherever they occur."""

AUTOGRAD_ATTRIBUTES = frozenset({"grad", "vjp", "jacrev", "jacobian", "func"})
"""Names that mean autograd as attributes (``C.grad``, ``torch.func.vjp``), not as variables
(a student may well call a temporary ``grad``)."""


def autograd_names(code: str) -> list[str]:
    """Names of autograd machinery the code mentions (comments and strings ignored); a name the
    code binds itself is its own variable (a temporary called ``backward``), not autograd's,
    except after a dot, where only a method the code defines itself is its own; ``p.grad =
    None`` and ``set_grad_enabled(False)`` use nothing of autograd."""
    found: list[str] = []
    own, methods = bound_names(code), own_functions(code)
    toks = tokens(without_harmless_autograd(code))
    for i, tok in enumerate(toks):
        attribute = i > 0 and toks[i - 1].string == "."
        if (
            tok.type == tokenize.NAME
            and tok.string not in found
            and not (attribute and tok.string in methods)
            and (
                (tok.string in AUTOGRAD_NAMES and (attribute or tok.string not in own))
                or (attribute and tok.string in AUTOGRAD_ATTRIBUTES)
            )
        ):
            found.append(tok.string)
    return found


def size_literals(code: str) -> list[int]:
    """Integer literals in the code that equal one of the lecture's sizes (see LECTURE_SIZES),
    exponents left out (``bnvar_inv**3`` is no size)."""
    found: list[int] = []
    toks = tokens(code)
    for i, tok in enumerate(toks):
        before = [t.string for t in toks[max(0, i - 2) : i]]
        if before[-1:] == ["**"] or before == ["**", "-"]:
            continue  # an exponent: bnvar_inv**3, x**-3
        if tok.type == tokenize.NUMBER and tok.string.isdigit():
            value = int(tok.string)
            if value in LECTURE_SIZES and value not in found:
                found.append(value)
    return found


def one_hot_without_classes(code: str) -> bool:
    """The code calls ``one_hot`` and never passes ``num_classes`` (neither by keyword nor as a
    second argument). Checked loosely: any second argument counts as the number of classes.
    One pass over the tokens (a cell of nested calls costs no more than any other)."""
    toks = tokens(code)
    names = [t.string for t in toks]
    if "one_hot" not in names or "num_classes" in names:
        return False
    calls: list[list[int]] = []  # per one_hot call still open: [depth inside it, arguments > 1]
    depth, previous = 0, ""
    for name in names:
        if name in ("(", "[", "{"):
            depth += 1
            if name == "(" and previous == "one_hot":
                calls.append([depth, 0])
        elif name in (")", "]", "}"):
            if calls and calls[-1][0] == depth:
                if not calls.pop()[1]:
                    return True  # closed with one argument
            depth -= 1
        elif name == "," and calls and calls[-1][0] == depth:
            calls[-1][1] = 1  # a second argument
        previous = name
    return False
    for i, t in enumerate(toks):
        if t.string != "one_hot" or i + 1 >= len(toks) or toks[i + 1].string != "(":
            continue
        depth = 0
        for u in toks[i + 1 :]:
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(u.string, 0)
            if depth == 1 and u.string == ",":
                break  # a second argument
            if depth == 0:
                return True
    return False

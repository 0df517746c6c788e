"""A learner's names, mapped to the exercise's: found from their own forward pass.

About one learner in five renames something: ``batch_size`` for ``n``, ``w1`` for ``W1``,
``bndiffsq`` for ``bndiff2``, gradients called ``dL_dlogits`` or ``dlogits_maxes``. The kit's
grader runs every answer in a namespace holding the exercise's own names, so the reader maps
theirs to ours:

1. **The forward pass.** Each line of the exercise's forward pass is *unified* with the
   learner's assignments, in order: the expressions must have the same structure (operators,
   methods, constants; ``keepdims`` and ``keepdim``, ``dim=0`` and ``0`` alike, ``a + b`` and
   ``b + a`` alike), and every name of ours binds the learner's name at that place (``w1`` at
   ``W1``'s place in ``hprebn = embcat @ W1 + b1``). A line written in another way but assigning
   our variable's own name still counts. The longest such run (at least :data:`MIN_LINES` of the
   lines) is the forward pass; a notebook may hold it more than once.
2. **Sizes.** ``n = batch_size`` and other plain aliases, the shapes the parameters are drawn
   with (``torch.randn((vocab_size, emb_dim))`` binds ``emb_dim`` to ``n_embd``) and the batch
   drawn with ``torch.randint(..., (batch_size,))``.
3. **Gradients.** A gradient's name is ours (``dlogits``); else the one a ``cmp('logits', G, T)``
   call compares with a forward tensor (the lecture's check, found in code, never in comments);
   else ``d`` and the learner's own name of the variable (``dbndiffsq``), or a common spelling
   (``dL_dlogits``, ``logits_grad``).

Why one module of this length: the unification of forward lines and the naming rules above work
on the same partial mapping, one concept.
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from ..exercises.definition import Exercise, Line
from .lecture_code import Notebook, Stmt

MIN_LINES = 10
"""How many of the forward pass's lines a run of assignments must match to be taken for it."""

WINDOW = 12
"""How many assignments may stand between two matched lines of one forward pass."""

REDUCTIONS = frozenset({"sum", "max", "min", "mean", "amax", "amin", "var", "std", "prod"})
KEYWORDS = {"keepdims": "keepdim", "axis": "dim"}
MODULES = {"torch": ("torch",), "F": ("torch.nn.functional", "nn.functional")}
SHAPED = frozenset({"randn", "rand", "zeros", "ones", "empty", "full", "normal"})
SPELLINGS = ("d{}", "d_{}", "dL_d{}", "dL_{}", "dloss_d{}", "grad_{}", "{}_grad", "d{}_grad")
"""How learners name the gradient of ``x`` when they do not write ``dx``."""


@dataclass
class Forward:
    """One occurrence of the exercise's forward pass in a notebook."""

    matched: dict[str, int]  # our variable -> index of the learner's statement
    names: dict[str, str]  # learner name -> ours (tensors, sizes, modules) from this occurrence
    score: int = 0  # the sum of the lines' matches (see :func:`match_line`)

    @property
    def start(self) -> int:
        return min(self.matched.values())

    @property
    def end(self) -> int:
        return max(self.matched.values())


@dataclass
class Names:
    """The learner's names and ours."""

    values: dict[str, str] = field(default_factory=dict)  # tensors, sizes, modules
    gradients: dict[str, str] = field(default_factory=dict)  # learner gradient -> step name
    modules: dict[str, str] = field(default_factory=dict)  # import alias -> dotted path

    def ours(self, name: str) -> str | None:
        """Our name (or dotted module path) for one of the learner's, if it has one."""
        return self.gradients.get(name) or self.values.get(name) or self.modules.get(name)

    def theirs(self, canonical: str) -> set[str]:
        """The learner's names for one of ours (ours included)."""
        every = {**self.values, **self.gradients}
        return {canonical} | {k for k, v in every.items() if v == canonical}


# -- unification --------------------------------------------------------------------------------


Env = dict[str, str]


class Kinds:
    """What each of our names is: a module, a size, a tensor (variable or leaf), or other."""

    def __init__(self, ex: Exercise) -> None:
        self.sizes = frozenset(ex.sizes)
        self.tensors = frozenset({*ex.parameters, *ex.data, *(line.var for line in ex.forward)})

    def kind(self, name: str) -> str:
        if name in MODULES:
            return "module"
        if name in self.sizes:
            return "size"
        if name in self.tensors:
            return "tensor"
        return "other"


def _bind(env: Env, theirs: str, ours: str, one_to_one: bool = True) -> Env | None:
    """``env`` with the learner's ``theirs`` bound to our ``ours``; None on a conflict. A tensor
    has one name (a size may have several: ``n`` and ``batch_size``)."""
    if env.get(theirs, ours) != ours:
        return None
    if env.get(theirs) == ours:
        return env
    if one_to_one and ours in env.values():
        return None
    return {**env, theirs: ours}


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _call_args(call: ast.Call) -> tuple[list[ast.expr], dict[str, ast.expr]]:
    """Positional and keyword arguments, a reduction's ``dim`` and ``keepdim`` by name."""
    pos = list(call.args)
    kw = {KEYWORDS.get(k.arg, k.arg): k.value for k in call.keywords if k.arg}
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in REDUCTIONS:
        for name, arg in zip(("dim", "keepdim"), pos[:2], strict=False):
            kw.setdefault(name, arg)
        pos = pos[2:]
    return pos, kw


def unify(ours: ast.AST, theirs: ast.AST, env: Env, kinds: Kinds) -> Env | None:
    """``env`` extended so that ``theirs`` is ``ours`` with the learner's names; None if the two
    expressions differ in structure."""
    if isinstance(ours, ast.Name):
        kind = kinds.kind(ours.id)
        if kind == "module":
            if isinstance(theirs, ast.Name):
                return _bind(env, theirs.id, ours.id, one_to_one=False)
            return env if ast.unparse(theirs) in MODULES[ours.id] else None
        if kind == "size":
            if isinstance(theirs, ast.Name):
                return _bind(env, theirs.id, ours.id, one_to_one=False)
            # a number or `x.shape[0]` where n belongs: no name to learn, the line still matches
            ok = isinstance(theirs, ast.Constant | ast.Subscript | ast.Attribute | ast.Call)
            return env if ok else None
        if kind == "tensor":
            return _bind(env, theirs.id, ours.id) if isinstance(theirs, ast.Name) else None
        return env if isinstance(theirs, ast.Name) and theirs.id == ours.id else None
    a, b = _number(ours), _number(theirs)
    if a is not None or b is not None:
        return env if a is not None and b is not None and math.isclose(a, b) else None
    if type(ours) is not type(theirs):
        return None
    if isinstance(ours, ast.BinOp) and isinstance(theirs, ast.BinOp):
        if type(ours.op) is not type(theirs.op):
            return None
        pairs = [(theirs.left, theirs.right)]
        if isinstance(ours.op, ast.Add | ast.Mult):
            pairs.append((theirs.right, theirs.left))
        for left, right in pairs:
            e = unify(ours.left, left, env, kinds)
            e = unify(ours.right, right, e, kinds) if e is not None else None
            if e is not None:
                return e
        return None
    if isinstance(ours, ast.UnaryOp) and isinstance(theirs, ast.UnaryOp):
        same = type(ours.op) is type(theirs.op)
        return unify(ours.operand, theirs.operand, env, kinds) if same else None
    if isinstance(ours, ast.Call) and isinstance(theirs, ast.Call):
        return _unify_call(ours, theirs, env, kinds)
    if isinstance(ours, ast.Attribute) and isinstance(theirs, ast.Attribute):
        return unify(ours.value, theirs.value, env, kinds) if ours.attr == theirs.attr else None
    if isinstance(ours, ast.Subscript) and isinstance(theirs, ast.Subscript):
        e = unify(ours.value, theirs.value, env, kinds)
        return unify(ours.slice, theirs.slice, e, kinds) if e is not None else None
    if isinstance(ours, ast.Tuple | ast.List) and isinstance(theirs, ast.Tuple | ast.List):
        return _unify_all(ours.elts, theirs.elts, env, kinds)
    if isinstance(ours, ast.Constant) and isinstance(theirs, ast.Constant):
        return env if ours.value == theirs.value else None
    same = ast.dump(ours, include_attributes=False) == ast.dump(theirs, include_attributes=False)
    return env if same else None


def _unify_all(
    ours: list[ast.expr], theirs: list[ast.expr], env: Env | None, kinds: Kinds
) -> Env | None:
    if len(ours) != len(theirs):
        return None
    for x, y in zip(ours, theirs, strict=True):
        if env is None:
            return None
        env = unify(x, y, env, kinds)
    return env


def _unify_call(ours: ast.Call, theirs: ast.Call, env: Env, kinds: Kinds) -> Env | None:
    f, g = ours.func, theirs.func
    e: Env | None
    if isinstance(f, ast.Attribute):
        if not isinstance(g, ast.Attribute) or f.attr != g.attr:
            return None
        e = unify(f.value, g.value, env, kinds)
    else:
        e = unify(f, g, env, kinds)
    if e is None:
        return None
    pos, kw = _call_args(ours)
    tpos, tkw = _call_args(theirs)
    if set(kw) != set(tkw):
        return None
    e = _unify_all(pos, tpos, e, kinds)
    return _unify_all([kw[k] for k in sorted(kw)], [tkw[k] for k in sorted(tkw)], e, kinds)


@lru_cache(maxsize=256)
def _expression(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def match_line(line: Line, stmt: Stmt, env: Env, kinds: Kinds) -> tuple[int, Env] | None:
    """How well an assignment is this line of the forward pass, with the names learnt: 3 for the
    same structure and name, 2 for the same structure under another name, 1 for our variable's
    name with another expression."""
    target, value = stmt.target, stmt.value
    if target is None or value is None or env.get(target, line.var) != line.var:
        return None
    e = unify(_expression(line.expression), value, env, kinds)
    found = _bind(e, target, line.var) if e is not None else None
    if found is not None:
        return (3 if target == line.var else 2), found
    if target == line.var:
        found = _bind(env, target, line.var)
        return (1, found) if found is not None else None
    return None


# -- the forward pass -------------------------------------------------------------------------


def find_forwards(nb: Notebook, ex: Exercise) -> list[Forward]:
    """Every occurrence of ``ex``'s forward pass, in file order (none overlapping)."""
    kinds = Kinds(ex)
    assigns = [s for s in nb.stmts if s.target is not None and s.value is not None]
    found: list[Forward] = []
    for i, stmt in enumerate(assigns):
        for k, line in enumerate(ex.forward[:4]):
            if match_line(line, stmt, {}, kinds) is not None:
                found.append(_follow(assigns, i, ex.forward[k:], kinds))
                break
    found = [f for f in found if len(f.matched) >= MIN_LINES]
    chosen: list[Forward] = []
    for f in sorted(found, key=lambda f: (-f.score, f.start)):
        if all(f.end < c.start or f.start > c.end for c in chosen):
            chosen.append(f)
    return sorted(chosen, key=lambda f: f.start)


def _follow(assigns: list[Stmt], first: int, lines: Iterable[Line], kinds: Kinds) -> Forward:
    """The forward pass as far as it goes from ``assigns[first]``, each line matched to the next
    assignment that is it (within :data:`WINDOW` assignments)."""
    env: Env = {}
    matched: dict[str, int] = {}
    score, at = 0, first
    for line in lines:
        for j in range(at, min(len(assigns), at + WINDOW)):
            hit = match_line(line, assigns[j], env, kinds)
            if hit is not None:
                score += hit[0]
                env = hit[1]
                matched[line.var] = assigns[j].index
                at = j + 1
                break
    return Forward(matched, env, score)


def learner_names(nb: Notebook, ex: Exercise, forwards: list[Forward]) -> Names:
    """The learner's names of tensors, sizes and modules (gradients: :func:`gradient_names`)."""
    names = Names()
    for f in sorted(forwards, key=lambda f: -f.score):
        for theirs, ours in f.names.items():
            names.values.setdefault(theirs, ours)
    names.modules = _modules(nb)
    for theirs, ours in list(names.values.items()):
        if Kinds(ex).kind(ours) == "module":  # `F` under another name: keep it a module
            names.modules.setdefault(theirs, ours)
            del names.values[theirs]
    start = forwards[0].start if forwards else len(nb.stmts)
    _sizes(nb.stmts[:start], ex, names)
    return names


def _modules(nb: Notebook) -> dict[str, str]:
    """``import torch.nn.functional as F`` and the like: alias -> our name or dotted path."""
    out: dict[str, str] = {}
    for s in nb.stmts:
        if isinstance(s.node, ast.Import):
            for alias in s.node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    path = alias.name if alias.asname else alias.name.split(".")[0]
                    out[alias.asname or path] = "F" if path == "torch.nn.functional" else path
        elif isinstance(s.node, ast.ImportFrom) and (s.node.module or "").startswith("torch"):
            for alias in s.node.names:
                path = f"{s.node.module}.{alias.name}"
                name = alias.asname or alias.name
                if path == "torch.nn.functional":
                    out[name] = "F"
                elif s.node.module == "torch.nn.functional":
                    out[name] = f"F.{alias.name}"
                elif s.node.module in ("torch", "torch.nn"):
                    out[name] = path
    return {k: v for k, v in out.items() if k != v}


def _sizes(before: list[Stmt], ex: Exercise, names: Names) -> None:
    """Sizes under other names: plain aliases, the parameters' shapes, the batch's size."""
    kinds = Kinds(ex)
    known = names.values

    def learn(theirs: str, ours: str) -> None:
        if theirs not in known and kinds.kind(theirs) == "other" and theirs not in names.modules:
            known[theirs] = ours

    leaves = {ours: theirs for theirs, ours in known.items() if ours in ex.leaf_shapes}
    for s in before:
        target, value = s.target, s.value
        if target is None or value is None:
            continue
        if isinstance(value, ast.Name):  # n = batch_size, or batch_size = n
            if kinds.kind(target) == "size":
                learn(value.id, target)
            elif known.get(value.id) in kinds.sizes:
                learn(target, known[value.id])
        leaf = next((ours for ours, theirs in leaves.items() if theirs == target), None)
        if leaf is None and target in ex.leaf_shapes:
            leaf = target
        if leaf is not None:
            dims = _drawn_shape(value)
            if dims is not None and len(dims) == len(ex.leaf_shapes[leaf]):
                for dim, want in zip(dims, ex.leaf_shapes[leaf], strict=True):
                    _learn_dim(dim, want, known, learn)
        for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Attribute) and call.func.attr == "randint":
                shape = call.args[2] if len(call.args) >= 3 else None
                if isinstance(shape, ast.Tuple) and len(shape.elts) == 1:
                    if isinstance(shape.elts[0], ast.Name):
                        learn(shape.elts[0].id, "n")


def _drawn_shape(value: ast.expr) -> list[ast.expr] | None:
    """The shape a parameter is drawn with: ``torch.randn((a, b), ...)`` -> ``[a, b]``."""
    for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Attribute) and call.func.attr in SHAPED and call.args:
            first = call.args[0]
            if isinstance(first, ast.Tuple | ast.List):
                return list(first.elts)
            return [a for a in call.args if not isinstance(a, ast.Starred)]
    return None


def _learn_dim(
    dim: ast.expr, want: str, known: dict[str, str], learn: Callable[[str, str], None]
) -> None:
    factors = want.split("*")
    if isinstance(dim, ast.Name) and len(factors) == 1 and not factors[0].isdigit():
        learn(dim.id, factors[0])
    elif isinstance(dim, ast.BinOp) and isinstance(dim.op, ast.Mult) and len(factors) == 2:
        parts = [dim.left, dim.right]
        if not all(isinstance(p, ast.Name) for p in parts):
            return
        ids = [p.id for p in parts if isinstance(p, ast.Name)]
        for i, name in enumerate(ids):
            ours = known.get(name, name)
            if ours in factors:
                other = ids[1 - i]
                rest = [f for f in factors if f != ours] or factors
                learn(other, rest[0])


# -- gradients ----------------------------------------------------------------------------------


def gradient_names(
    nb: Notebook, ex: Exercise, names: Names, region: Iterable[Stmt], after: int
) -> dict[str, str]:
    """Learner gradient name -> step name, for the names bound in ``region``; the ``cmp`` calls
    from statement ``after`` on count as evidence."""
    steps = {s.var: s.name for s in ex.steps if s.kind == "gradient"}
    out: dict[str, str] = {name: name for name in steps.values()}
    votes: dict[str, Counter[str]] = {}
    for s in nb.stmts[after:]:
        for theirs, var in compared(s.node, names):
            if var in steps:
                votes.setdefault(theirs, Counter())[steps[var]] += 1
    bound = {n for s in region for n in s.defs | s.mods}
    for theirs, counter in votes.items():
        if theirs not in out and names.values.get(theirs) is None:
            out[theirs] = counter.most_common(1)[0][0]
    for var, step in steps.items():
        for alias in names.theirs(var):
            for spelling in SPELLINGS:
                candidate = spelling.format(alias)
                if candidate in bound and candidate not in out and candidate not in names.values:
                    out[candidate] = step
    return out


def compared(node: ast.AST, names: Names) -> Iterable[tuple[str, str]]:
    """``(gradient name, our variable)`` for each check in ``node`` that compares a gradient with
    a forward tensor: ``cmp('x', dx, x)`` (any function called with a label and two names), and
    ``torch.allclose(dx, x.grad)``."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        args = call.args
        if (
            len(args) >= 3
            and isinstance(args[0], ast.Constant)
            and isinstance(args[0].value, str)
            and isinstance(args[1], ast.Name)
        ):
            label, grad, tensor = args[0].value.strip(), args[1].id, args[2]
            if isinstance(tensor, ast.Name):
                ours = names.values.get(tensor.id, tensor.id)
                yield grad, ours
            elif label:
                yield grad, names.values.get(label, label)
        elif len(args) == 2 and isinstance(args[0], ast.Name):
            other = args[1]
            if (
                isinstance(other, ast.Attribute)
                and other.attr == "grad"
                and isinstance(other.value, ast.Name)
            ):
                yield args[0].id, names.values.get(other.value.id, other.value.id)

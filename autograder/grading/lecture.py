"""Reading a notebook in the lecture's own format: its answers, found by following the data.

Whoever did Exercise 1 in the lecture's ``makemore_part4_backprop.ipynb`` (or a copy of it) wrote
the backward pass as lines in one cell or several, each gradient followed by a
``cmp('logprobs', dlogprobs, logprobs)``, with attempts, scratch lines and Exercises 2 and 3
around it. Nothing marks an answer, so the reader works statically, on the parsed code (nothing
of the notebook is run here):

1. **The forward pass** is found by matching the exercise's lines to the learner's assignments,
   which also maps the learner's names to ours (:mod:`autograder.grading.lecture_names`). A
   notebook with no grade ids and such a forward pass is in the lecture's format.
2. **The region** of the answers runs from the end of the forward pass to the first statement
   that draws the parameters or the batch anew (Exercise 4's cell does); a second copy of the
   forward pass starts a region again. Comments and outputs are never read.
3. **A step's attempts**: each statement that binds one of the step's gradient names afresh
   (``dcounts = ...``) starts an attempt; each later one that builds on it (``dcounts += ...``,
   ``dC[ix] += ...`` in a loop, ``dC.index_add_(...)``) joins it, whatever stands between. The
   last attempt is the answer; a lone ``= None`` placeholder is none.
4. **Temporaries**: every name the answer reads that the grader does not provide (``mask``,
   ``temp``, ``dcounts1``, a helper function, an ``import``) brings in its own defining
   statements, found backwards from where it is read, recursively. A gradient the step is not
   given stays as it is, and the grader's diagnosis says so in words; where it is only read for
   its shape (``torch.ones_like(dbndiff)``), the variable it is the gradient of stands in.
5. **Other exercises**: an attempt at ``dlogits`` or ``dhprebn`` that reads none of the
   gradients Exercise 1 gives that step but reads the targets or another gradient (the
   lecture's one-go formulas, ``F.softmax(logits, 1)`` ... ``Yb``; ``... dhpreact ...``) is
   Exercise 2's or Exercise 3's answer, graded as a submission of that exercise.

The answer's code is rewritten to our names (``w1`` -> ``W1``, ``dL_dlogits`` -> ``dlogits``) by
splicing the learner's own text, so the grader's namespace runs it as it is; it keeps the
learner's line numbers where it can, so an error "on line 7" is line 7 of the cell named in the
step's ``where``.

Why one module of this length: steps 2 to 5 share one :class:`Context` (the notebook's
statements, forward passes, names and region), and each decision about an attempt (whose
exercise it is, its temporaries, its renaming) is made on that same state. The statement index and
the name mapping they build on live in :mod:`~autograder.grading.lecture_code` and
:mod:`~autograder.grading.lecture_names`.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..exercises import BACKPROP_NINJA, BATCHNORM_BACKWARD, CROSS_ENTROPY_BACKWARD, Exercise, Step
from .lecture_code import Notebook, Stmt, lines_words, read_cells, segment
from .lecture_names import (
    Forward,
    Names,
    compared,
    find_forwards,
    gradient_names,
    learner_names,
)
from .plain import BUILTINS
from .submission import MAX_ANSWER_CHARS, MAX_CELL_CHARS, Submission

MAIN = BACKPROP_NINJA
"""The exercise whose forward pass a lecture notebook holds (Exercise 1)."""

ONE_GO: tuple[Exercise, ...] = (CROSS_ENTROPY_BACKWARD, BATCHNORM_BACKWARD)
"""Exercises whose one step the lecture's notebook answers in one go after Exercise 1."""

STUB = "raise NotImplementedError"
"""The code of a step with no answer (the grader reads it as not implemented)."""

MAX_TEMPORARY_STATEMENTS = 40
"""Statements that temporaries may bring into one answer; past that, names stay unresolved."""

SHAPE_ONLY = frozenset({"shape", "dtype", "device", "size", "ndim", "dim", "numel"})
LIKE = frozenset({"ones_like", "zeros_like", "empty_like", "full_like", "rand_like", "randn_like"})
PYTHON = frozenset(dir(builtins)) | BUILTINS


@dataclass
class Attempt:
    """One try at a step: its statements, in file order."""

    stmts: list[Stmt]

    @property
    def placeholder(self) -> bool:
        """Only ``dx = None`` (the lecture's starter leaves these)."""
        value = self.stmts[0].value if len(self.stmts) == 1 else None
        return isinstance(value, ast.Constant) and value.value in (None, Ellipsis)


@dataclass
class Context:
    """What the reader found in one notebook: its statements, forward passes, names, region."""

    nb: Notebook
    forwards: list[Forward]
    names: Names
    region: list[Stmt]
    stops: list[Stmt]  # the statements that ended a region (parameters or batch drawn anew)

    @cached_property
    def in_region(self) -> frozenset[int]:
        """The indices of the region's statements."""
        return frozenset(s.index for s in self.region)


def read_lecture(nb: Mapping[str, Any], path: Path) -> list[Submission] | None:
    """The submissions of a notebook in the lecture's format: Exercise 1 always, Exercises 2 and
    3 when the notebook answers them. None when the notebook holds no forward pass of the lecture
    (it is not in the lecture's format)."""
    code = read_cells(nb.get("cells") or [], MAX_CELL_CHARS)
    forwards = find_forwards(code, MAIN)
    if not forwards:
        return None
    names = learner_names(code, MAIN, forwards)
    region, stops = _region(code, forwards, names)
    names.gradients = gradient_names(code, MAIN, names, region, forwards[0].start)
    _follow_gradients(names, region)
    ctx = Context(code, forwards, names, region, stops)
    main = Submission(path=path, exercise=MAIN, format="lecture")
    extra: list[Submission] = []
    claimed: dict[str, list[Attempt]] = {}
    cells = _one_go_cells(ctx)
    for other in ONE_GO:
        step = other.steps[0]
        attempts = _attempts(ctx, step.name)
        after = _after_the_chain(ctx, attempts, step)
        mine = [
            a
            for a, later in zip(attempts, after, strict=True)
            if cells.get(a.stmts[-1].cell) is other or _one_go(ctx, a, step) or later
        ]
        claimed[step.name] = mine
        if mine:
            sub = Submission(path=path, exercise=other, format="lecture")
            _answer(ctx, sub, step, mine[-1])
            extra.append(sub)
    for step in MAIN.steps:
        taken = {id(a.stmts[0]) for a in claimed.get(step.name, [])}
        attempts = [
            a
            for a in _attempts(ctx, step.name)
            if id(a.stmts[0]) not in taken and not all(s.cell in cells for s in a.stmts)
        ]
        if attempts:
            _answer(ctx, main, step, attempts[-1])
        else:
            main.answers[step.name] = STUB
            main.problems[step.name] = _not_found(ctx, step, claimed.get(step.name, []))
    return [main, *extra]


# -- regions and attempts ---------------------------------------------------------------------


def _region(nb: Notebook, forwards: list[Forward], names: Names) -> tuple[list[Stmt], list[Stmt]]:
    """The statements after each forward pass, up to where the parameters or the batch are
    drawn anew (or the next forward pass)."""
    leaves = {*MAIN.parameters, *MAIN.data}
    in_forward = {i for f in forwards for i in f.matched.values()}
    region: list[Stmt] = []
    stops: list[Stmt] = []
    for k, f in enumerate(forwards):
        stop = forwards[k + 1].start if k + 1 < len(forwards) else len(nb.stmts)
        for s in nb.stmts[f.end + 1 : stop]:
            if s.index in in_forward:
                continue
            if any(names.values.get(d, d) in leaves for d in s.defs):
                stops.append(s)
                break
            region.append(s)
    return region, stops


def _follow_gradients(names: Names, region: list[Stmt]) -> None:
    """Correct a gradient name by what its code does: a learner's ``da``, taken for the gradient
    of their ``a`` (our ``h``), that is only ever computed from ``dh`` is the gradient one step
    further down (``dhpreact``), when that one has no name of its own."""
    for theirs, step in list(names.gradients.items()):
        if theirs == step:
            continue  # our own name means what it says
        fresh = [s for s in region if theirs in s.defs and theirs not in s.reads]
        other = names.theirs(step) - {theirs}
        if not fresh or not all(s.reads & other for s in fresh):
            continue
        below = [t for t in MAIN.steps if step in t.upstream]
        named = (
            {n for s in region for n in s.defs} & names.theirs(below[0].name) if below else set()
        )
        if len(below) == 1 and not named:
            names.gradients[theirs] = below[0].name


def _attempts(ctx: Context, step_name: str) -> list[Attempt]:
    """Every attempt at a step in the region, in order, placeholders left out."""
    aliases = ctx.names.theirs(step_name)
    out: list[Attempt] = []
    for s in ctx.region:
        if not (s.defs | s.mods) & aliases:
            continue
        value = s.value
        if isinstance(value, ast.Name) and value.id in aliases and s.target in aliases:
            continue  # dhpreact = dL_dhpreact: one gradient under two names
        # built on only when it reads the very name it binds (x += ..., x = x + ...)
        fresh = bool(s.defs & aliases) and not (s.reads & s.defs & aliases)
        if fresh or not out:
            out.append(Attempt([s]))
        else:
            out[-1].stmts.append(s)
    return [a for a in out if not a.placeholder]


def _one_go_cells(ctx: Context) -> dict[int, Exercise]:
    """Cells that answer a one-go exercise in several lines: the cell binds that exercise's
    gradient (``dlogits``) and checks nothing else (its only ``cmp`` is on ``logits``), binds
    other names on the way (Exercise 1's gradients, or forward tensors computed anew), and its
    last binding of the gradient, followed through what the cell itself binds before, reads no
    gradient of Exercise 1 from outside the cell but the exercise's own (``dhpreact``). What such
    a cell binds is its answer's temporaries, not Exercise 1's attempts."""
    by_cell: dict[int, list[Stmt]] = {}
    for s in ctx.region:
        by_cell.setdefault(s.cell, []).append(s)
    tensors = {line.var for line in MAIN.forward}
    out: dict[int, Exercise] = {}
    for cell, stmts in by_cell.items():
        checked = {var for s in stmts for _, var in compared(s.node, ctx.names)}
        for ex in ONE_GO:
            step = ex.steps[0]
            aliases = ctx.names.theirs(step.name)
            last = [s for s in stmts if s.defs & aliases]
            if checked != {step.var} or not last:
                continue
            bound = {ctx.names.ours(n) or n for s in stmts for n in s.defs - aliases}
            if not bound & (set(MAIN.by_name) | tensors):
                continue
            read = {ctx.names.ours(n) or n for n in _within(stmts, last[-1])}
            if not (read & set(MAIN.by_name)) - _given(ex):
                out[cell] = ex
    return out


def _within(stmts: Sequence[Stmt], answer: Stmt) -> set[str]:
    """The names ``answer`` reads, followed back through what ``stmts`` (one cell) bind before
    it: the names it reads from outside."""
    by_name: dict[str, list[Stmt]] = {}
    for s in stmts:
        if s.index < answer.index:
            for name in s.defs | s.mods:
                by_name.setdefault(name, []).append(s)
    free: set[str] = set()
    todo = set(answer.reads)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        binders = by_name.get(name, [])
        if not binders:
            free.add(name)
        for s in binders:
            todo |= s.reads - {name}
    return free


def _one_go(ctx: Context, attempt: Attempt, step: Step) -> bool:
    """An attempt at a step of Exercise 1 that answers the one-go exercise of that step instead:
    it reads none of the gradients Exercise 1 gives the step, and reads the targets or some other
    gradient. Autograd's ``x.grad`` counts as the gradient of ``x``: ``hpreact.grad`` standing in
    for ``dhpreact`` in the one-go formula is an attempt at Exercise 3 (which then fails for
    autograd), while ``hprebn.grad`` pasted in for ``dhprebn`` reads neither and stays Exercise
    1's, a slip."""
    stmts, _ = _with_temporaries(ctx, attempt)
    read = {ctx.names.ours(n) or n for n in _free(stmts)} | _autograd_reads(ctx, stmts)
    steps = {s.name for s in MAIN.steps}
    given = set(MAIN.step(step.name).upstream)
    others = (read & steps) - given - {step.name}
    return not read & given and (bool(others) or bool(read & set(MAIN.data) - {"Xb"}))


def _after_the_chain(ctx: Context, attempts: Sequence[Attempt], step: Step) -> list[bool]:
    """For each attempt at ``dlogits`` (or ``dhprebn``), whether it reads none of the gradients
    Exercise 1 gives it and stands in a later cell than an attempt that does (Exercise 1's, by
    the chain rule): an attempt at the one-go exercise (``dlogits = F.softmax(logits, 1) / n``,
    unfinished), not a new answer to Exercise 1 that would replace the chain rule's. One pass
    over the attempts, in file order, each read once."""
    given = set(MAIN.step(step.name).upstream)
    out: list[bool] = []
    first_chain: int | None = None  # the cell of the first attempt by the chain rule
    for a in attempts:
        stmts, _ = _with_temporaries(ctx, a)
        chain = bool({ctx.names.ours(n) or n for n in _free(stmts)} & given)
        out.append(not chain and first_chain is not None and first_chain < a.stmts[0].cell)
        if chain and first_chain is None:
            first_chain = a.stmts[-1].cell
    return out


def _autograd_reads(ctx: Context, stmts: Sequence[Stmt]) -> set[str]:
    """The gradients of Exercise 1 that ``stmts`` read from autograd, as ``x.grad``."""
    by_var = {s.var: s.name for s in MAIN.steps}
    out: set[str] = set()
    for s in stmts:
        for node in ast.walk(s.node):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "grad"
                and isinstance(node.value, ast.Name)
            ):
                var = ctx.names.ours(node.value.id) or node.value.id
                if var in by_var:
                    out.add(by_var[var])
    return out


# -- the answer's code ------------------------------------------------------------------------


def _free(stmts: Sequence[Stmt]) -> dict[str, int]:
    """Names the statements read before binding them, each with the index of the first
    statement that reads it."""
    bound: set[str] = set()
    free: dict[str, int] = {}
    for s in stmts:
        for name in sorted(s.reads - bound):
            free.setdefault(name, s.index)
        bound |= s.defs | s.mods
    return free


def _provided(ctx: Context, name: str, ex: Exercise, given: set[str] | None = None) -> bool:
    """The grader's namespace has it (under our name), or it is Python's. In a one-go exercise
    a gradient of Exercise 1 it is not given is the learner's own temporary (Exercise 2's
    ``dlogprobs = ...; dlogits = dlogprobs + ...``), defined in the answer's own cell; so it is
    in Exercise 1 when ``given`` (the step's upstream gradients and its own) is known and the
    gradient is not among them (``dlogits = dnorm_logits.clone()`` read by ``dlogit_maxes``)."""
    ours = ctx.names.ours(name)
    if ours is not None:
        if ex is MAIN:
            return given is None or ours not in MAIN.by_name or ours in given
        return ours not in MAIN.by_name or ours in ex.by_name or ours in _given(ex)
    return name in ex.provided or name in MAIN.provided or name in PYTHON


def _given(ex: Exercise) -> set[str]:
    return {u for s in ex.steps for u in s.upstream}


def _with_temporaries(
    ctx: Context, attempt: Attempt, ex: Exercise = MAIN, given: set[str] | None = None
) -> tuple[list[Stmt], set[str]]:
    """The attempt's statements and those defining the temporaries it reads (file order), and
    the names nothing defines. ``given``: see :func:`_provided`.

    Each read of a temporary brings the definition that reaches that very statement (its last
    binding before it and whatever changed it since), so a temporary changed in place between
    two reads (``counts = ...; counts_sum = counts.sum(...); counts[...] -= ...; ... counts``)
    comes with every line the answer's read depends on."""
    included = {s.index: s for s in attempt.stmts}
    home = attempt.stmts[-1].cell
    missing: set[str] = set()
    before_forward = ctx.forwards[0].start
    done: set[tuple[str, int]] = set()
    while True:
        todo = [
            (name, s.index)
            for s in sorted(included.values(), key=lambda s: s.index)
            for name in sorted(s.reads)
            if (name, s.index) not in done
        ]
        grew = False
        for name, at in todo:
            done.add((name, at))
            if _provided(ctx, name, ex, given) and not _rebound(ctx, name, at, home):
                continue
            chain = _definition(ctx.nb, name, at, before_forward)
            if ctx.names.ours(name) is not None and not _own_gradient(ctx, chain, home, ex, given):
                chain = []  # a gradient from elsewhere stays what it is: one the step is not given
            new = [s for s in chain if s.index not in included]
            if not chain or len(included) + len(new) > MAX_TEMPORARY_STATEMENTS:
                if not any(name in s.defs | s.mods for s in included.values() if s.index < at):
                    missing.add(name)
                continue
            for s in new:
                included[s.index] = s
            grew = grew or bool(new)
        if not grew:
            return [included[i] for i in sorted(included)], missing


def _rebound(ctx: Context, name: str, before: int, home: int) -> bool:
    """Whether a name the grader provides (a forward tensor) was bound anew, after the forward
    pass, in the answer's own cell before statement ``before`` reads it (Exercise 2's
    ``counts = logits.exp()`` ... ``dlogits = ... counts ...``): then it is the learner's
    temporary, and its definition comes along."""
    if ctx.names.ours(name) in MAIN.by_name:
        return False  # gradients: see _provided
    last = next(ctx.nb.binding(name, before), None)  # the binding the read sees
    return last is not None and last.cell == home and last.index in ctx.in_region


def _own_gradient(
    ctx: Context, chain: Sequence[Stmt], home: int, ex: Exercise, given: set[str] | None
) -> bool:
    """Whether a gradient the answer reads, defined by ``chain``, is the learner's temporary:
    defined in the answer's own cell and, in Exercise 1, from nothing but what the step is
    given (``dlogits = dnorm_logits.clone()`` read by ``dlogit_maxes``; ``dprobs`` read by
    ``dcounts_sum`` is another step's answer, and stays a gradient the step is not given)."""
    if any(s.cell != home for s in chain):
        return False
    if ex is not MAIN or given is None:
        return True
    read = {ctx.names.ours(n) or n for n in _free(chain)}
    return not (read & set(MAIN.by_name)) - given


def _definition(nb: Notebook, name: str, before: int, forward_start: int) -> list[Stmt]:
    """The statements that give ``name`` its value where statement ``before`` reads it: its last
    fresh binding and whatever built on it since. Before the forward pass only definitions and
    imports count (data loading is not an answer's)."""
    chain: list[Stmt] = []
    for s in nb.binding(name, before):
        if name in s.defs:
            if s.index < forward_start and not _portable(s):
                return []
            return [s, *reversed(chain)]
        if name in s.mods:
            chain.append(s)
    return []


def _portable(s: Stmt) -> bool:
    node = s.node
    if isinstance(node, ast.FunctionDef | ast.Import | ast.ImportFrom):
        return True
    value = s.value
    return isinstance(value, ast.Lambda | ast.Constant)


def _renames(ctx: Context, stmts: Iterable[Stmt], step: Step, ex: Exercise) -> dict:
    """``{(line, column): (end column, text)}`` for every name to rewrite in ``stmts``.

    A gradient read only for its shape (``torch.ones_like(dbndiff)``) becomes the variable it
    is the gradient of, when the step is not given it, or when it is the step's own gradient
    read before the answer binds it (``dbndiff2 = torch.ones_like(dbndiff2) * ...``, which ran
    in the learner's kernel only because an earlier run had left ``dbndiff2`` behind)."""
    given = {*step.upstream, step.name}
    bound: set[str] = set()  # our names the answer has bound so far
    out: dict[tuple[int, int], tuple[int, str]] = {}
    for s in stmts:
        parents = {id(c): p for p in ast.walk(s.node) for c in ast.iter_child_nodes(p)}
        local = _locals(s.node)
        for node in (n for n in ast.walk(s.node) if isinstance(n, ast.Name)):
            if id(node) in local:
                continue
            ours = ctx.names.ours(node.id)
            if ours is None:
                continue
            if ours in ex.by_name or ours in MAIN.by_name:
                other = ex.by_name.get(ours) or MAIN.by_name[ours]
                unbound = ours == step.name and ours not in bound
                if (ours not in given or unbound) and _shape_only(node, parents):
                    ours = other.var  # torch.ones_like(dbndiff): the shape of bndiff
            if ours != node.id and node.end_col_offset is not None:
                out[(node.lineno, node.col_offset)] = (node.end_col_offset, ours)
        bound |= {ctx.names.ours(n) or n for n in s.defs | s.mods}
    return out


def _shape_only(node: ast.Name, parents: Mapping[int, ast.AST]) -> bool:
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute) and parent.attr in SHAPE_ONLY:
        return True
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        func = parent.func
        return isinstance(func, ast.Attribute) and func.attr in LIKE
    return False


def _locals(node: ast.AST) -> set[int]:
    """Name nodes never renamed: a function's or a comprehension's own, and those inside
    f-strings (whose positions older Pythons do not report)."""
    out: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.JoinedStr):
            out |= {id(x) for x in ast.walk(n) if isinstance(x, ast.Name)}
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = n.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            own = {a.arg for a in every if a is not None}
            body = n.body if isinstance(n.body, list) else [n.body]
            for b in body:
                out |= {id(x) for x in ast.walk(b) if isinstance(x, ast.Name) and x.id in own}
        elif isinstance(n, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            own = {
                x.id for g in n.generators for x in ast.walk(g.target) if isinstance(x, ast.Name)
            }
            out |= {id(x) for x in ast.walk(n) if isinstance(x, ast.Name) and x.id in own}
    return out


def _preamble(ctx: Context, stmts: Sequence[Stmt], ex: Exercise) -> list[str]:
    """Exercise 1's forward lines that an answer to another exercise reads (``probs``,
    ``bndiff``...) and that exercise's namespace does not hold, in forward order."""
    if ex is MAIN:
        return []
    wanted = {ctx.names.ours(n) or n for n in _free(stmts)}
    have = set(ex.provided)
    needed: set[str] = set()
    for line in reversed(MAIN.forward):
        if line.var in wanted - have or line.var in needed:
            needed.add(line.var)
            wanted |= line.reads
    return [line.source for line in MAIN.forward if line.var in needed - have]


def _answer(ctx: Context, sub: Submission, step: Step, attempt: Attempt) -> None:
    """Put the attempt's code, in our names, into the submission, with where it was found."""
    given = {*step.upstream, step.name} if sub.exercise is MAIN else None
    stmts, _ = _with_temporaries(ctx, attempt, sub.exercise, given)
    edits = _renames(ctx, stmts, step, sub.exercise)
    lines = _preamble(ctx, stmts, sub.exercise)
    home = attempt.stmts[-1].cell
    for s in stmts:
        if s.cell == home and len(lines) < s.lineno - 1:
            lines += [""] * (s.lineno - 1 - len(lines))  # keep the cell's own line numbers
        lines += segment(s, edits).split("\n")
    sub.answers[step.name] = "\n".join(lines).rstrip() + "\n"
    if len(sub.answers[step.name]) > MAX_ANSWER_CHARS:
        sub.answers[step.name] = STUB
        sub.problems[step.name] = (
            f"the answer found is too long to be graded (at most {MAX_ANSWER_CHARS:,} characters)"
        )
    sub.where[step.name] = lines_words(stmts)


def _not_found(ctx: Context, step: Step, claimed: list[Attempt]) -> str:
    """What was looked for, and where, for a step with no answer (a reason, in words)."""
    forward = ctx.nb.stmts[ctx.forwards[0].end]
    var_names = " or ".join(f"`{n}`" for n in sorted(ctx.names.theirs(step.var)))
    said = " or ".join(f"`{g}`" for g in sorted(ctx.names.theirs(step.name)))
    where = f"after the forward pass (cell {forward.cell})"
    if ctx.stops:
        where += f" and before cell {ctx.stops[0].cell}, where the parameters or batch are new"
    text = (
        f"looked for an assignment to {said}, or to a name that a `cmp` call compares with "
        f"{var_names}, {where}, and found none"
    )
    if claimed:
        ups = " or ".join(f"`{u}`" for u in step.upstream)
        text += (
            f" (the `{step.name}` in {lines_words(claimed[-1].stmts)} reads neither {ups}, so "
            "it was graded as the answer to the exercise that computes it in one go)"
        )
    if ctx.nb.unparsed:
        text += f"; lines that are not valid Python were skipped: {_skipped_words(ctx.nb)}"
    return text


def not_answered(ex: Exercise) -> str:
    """Why a notebook in the lecture's format holds no submission of ``ex`` (graded as that
    assignment), in words."""
    if ex is not MAIN and ex not in ONE_GO:
        read = ", ".join(f"`{e.id}`" for e in (MAIN, *ONE_GO))
        return (
            f"this notebook is in the lecture's own format, from which the kit reads {read}, "
            f"not {ex.text.title} (`{ex.id}`): answer it in the kit's {ex.id}.ipynb and hand "
            "that in"
        )
    step = ex.steps[0]
    given = " or ".join(f"`{u}`" for u in step.upstream)
    source = f"from {given} " if given else ""
    return (
        f"this notebook is in the lecture's own format and holds no answer to {ex.text.title} "
        f"(`{ex.id}`): no statement after the forward pass computes `{step.name}` {source}in "
        f"one go, without the gradients of Exercise 1"
    )


def _skipped_words(nb: Notebook) -> str:
    """The statements skipped as not valid Python, in words: ``cell 10 (line 2), cell 12
    (lines 3-4, 9)``."""
    words = []
    for cell, spans in sorted(nb.unparsed.items()):
        parts = [str(a) if a == b else f"{a}-{b}" for a, b in spans]
        lines = "line" if len(parts) == 1 and "-" not in parts[0] else "lines"
        words.append(f"cell {cell} ({lines} {', '.join(parts)})")
    return ", ".join(words)


__all__ = ["not_answered", "read_lecture"]

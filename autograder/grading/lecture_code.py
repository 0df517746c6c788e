"""The code of a notebook as a sequence of statements, with what each one binds, changes and reads.

The lecture-format reader (:mod:`autograder.grading.lecture`) never runs a notebook: it parses
every code cell with :mod:`ast` and follows the data flow. Here a notebook becomes a flat list of
:class:`Stmt`, in file order, one per top-level statement (the body of a ``with`` block counts as
top level: ``with torch.no_grad():`` changes nothing about what a line computes; a tuple
assignment ``a, b = x, y`` counts as one statement per name). For each one:

- ``defs``: names bound afresh (``x = ...``, a ``for`` target, ``def``, ``import``);
- ``mods``: names changed in place or built on (``x += ...``, ``x[i] = ...``, ``x.index_add_(...)``,
  ``np.add.at(x, ...)``, ``torch.matmul(a, b, out=x)``, ``x = x + ...``);
- ``reads``: names read before the statement binds them (its free names).

:func:`render` turns statements back into source with names rewritten (``w1`` -> ``W1``) by
splicing the original text at each name's position: comments, spacing and line breaks inside a
statement stay the learner's own.

Why one module of this length: the statement model and the data-flow rules above are one
concept (what a statement binds, changes and reads), applied to every kind of statement.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import contextvars
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from .cell_parse import parse_cell, without_magics


@dataclass(frozen=True)
class Stmt:
    """One statement of a notebook (see the module docstring)."""

    index: int  # position in the notebook's flat sequence
    cell: int  # the cell it is in, counted from 1 over all cells (as the kit's reports count)
    node: ast.stmt
    source: tuple[bytes, ...]  # the cell's lines, UTF-8 (ast's column offsets are in bytes)
    defs: frozenset[str]
    mods: frozenset[str]
    reads: frozenset[str]
    part: int | None = None  # for ``a, b = x, y``: which element this statement is

    @property
    def lineno(self) -> int:
        return self.node.lineno

    @property
    def end_lineno(self) -> int:
        return self.node.end_lineno or self.node.lineno

    @property
    def target(self) -> str | None:
        """The name a plain ``name = value`` statement binds (or this part's name)."""
        tgt = _single_target(self.node, self.part)
        return tgt.id if isinstance(tgt, ast.Name) else None

    @property
    def value(self) -> ast.expr | None:
        """The value of a plain assignment (or this part's value)."""
        return _single_value(self.node, self.part)


@dataclass
class Notebook:
    """A notebook's statements, and the cells that could not be read as Python."""

    stmts: list[Stmt] = field(default_factory=list)
    unparsed: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # cell -> the
    # first and last line of each statement skipped as not valid Python (see cell_parse)
    binders: dict[str, list[int]] = field(default_factory=dict)  # name -> statements binding
    # or changing it, in order (so a name's definition is found without scanning the notebook)

    def binding(self, name: str, before: int) -> Iterator[Stmt]:
        """The statements before statement ``before`` that bind or change ``name``, last first."""
        at = self.binders.get(name, [])
        for i in reversed(at[: bisect.bisect_left(at, before)]):
            yield self.stmts[i]


MAX_STATEMENTS = 3_000
"""The most statements the reader follows in one notebook (the lecture's notebook, answered,
has about 200; real learners' at most about 300): the data flow is followed in time that grows
with their number, so a notebook past it is refused with a reason rather than followed."""

MAX_CODE_CHARS = 300_000
"""The most characters of code the reader parses in one notebook (learners' about 20,000)."""

MAX_PARTS = 16
"""``a, b, ... = x, y, ...`` with more names than this is read as one statement, not split."""


class TooMuchCode(ValueError):
    """A notebook with more code than the reader follows (see :data:`MAX_STATEMENTS`)."""


def cell_source(cell: Mapping[str, object]) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def without_leading_indent(text: str) -> str:
    """The cell's text as IPython runs it: when its first non-blank line is indented, that
    indentation is taken off every line that starts with it (a cell pasted from inside a
    function runs in Jupyter; line numbers are kept)."""
    lines = text.split("\n")
    first = next((line for line in lines if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return text
    return "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines)


def read_cells(cells: Iterable[Mapping[str, object]], max_chars: int = 100_000) -> Notebook:
    """Every code cell's statements, in file order."""
    helpers = Helpers()
    token = _HELPERS.set(helpers)
    try:
        return _read_cells(cells, max_chars, helpers)
    finally:
        _HELPERS.reset(token)


def _read_cells(
    cells: Iterable[Mapping[str, object]], max_chars: int, helpers: Helpers
) -> Notebook:
    out = Notebook()
    total = 0
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        text = without_leading_indent(without_magics(cell_source(cell)))
        if not text.strip() or len(text) > max_chars:
            continue
        total += len(text)
        if total > MAX_CODE_CHARS:
            raise TooMuchCode(f"more than {MAX_CODE_CHARS:,} characters of code")
        try:
            tree, skipped = parse_cell(text)
        except (ValueError, RecursionError, MemoryError):
            out.unparsed[number] = [(1, len(text.split("\n")))]
            continue
        if skipped:
            out.unparsed[number] = skipped
        lines = tuple(line.encode() for line in text.split("\n"))
        for node, part in _flatten(tree.body):
            if len(out.stmts) >= MAX_STATEMENTS:
                raise TooMuchCode(f"more than {MAX_STATEMENTS:,} statements")
            defs, mods, reads = analyse(node, part)
            _learn(node, helpers)  # for the calls after it
            index = len(out.stmts)
            out.stmts.append(Stmt(index, number, node, lines, defs, mods, reads, part))
            for name in defs | mods:
                out.binders.setdefault(name, []).append(index)
    return out


GRAD_MODE_OFF = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})
"""Context managers whose body the reader reads as top-level code (``with torch.no_grad():``
around the lecture's training step): they only turn grad mode off, so the body runs as
written. Any other ``with`` (``contextlib.suppress``, say, which may skip the rest of its body)
stays one statement, run as a whole."""


def _flatten(body: list[ast.stmt]) -> Iterator[tuple[ast.stmt, int | None]]:
    for node in body:
        if isinstance(node, ast.With) and all(_turns_grad_off(item) for item in node.items):
            yield from _flatten(node.body)
        elif _parts(node):
            for i in range(_parts(node)):
                yield node, i
        else:
            yield node, None


def _turns_grad_off(item: ast.withitem) -> bool:
    call = item.context_expr
    if item.optional_vars is not None or not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name == "set_grad_enabled":  # only set_grad_enabled(False)
        off = call.args[0] if len(call.args) == 1 and not call.keywords else None
        return isinstance(off, ast.Constant) and off.value is False
    return name in GRAD_MODE_OFF and not call.args and not call.keywords


def _parts(node: ast.stmt) -> int:
    """How many names ``a, b = x, y`` binds (0 for any other statement, and for one whose
    values read a name it binds before them, ``t, dh = x, t``: one after another, ``dh`` would
    get the new ``t``, where Python gives it the old one)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        t, v = node.targets[0], node.value
        if (
            isinstance(t, ast.Tuple | ast.List)
            and isinstance(v, ast.Tuple | ast.List)
            and MAX_PARTS >= len(t.elts) == len(v.elts) > 1
            and all(isinstance(e, ast.Name) for e in t.elts)
        ):
            names = [cast(ast.Name, e).id for e in t.elts]
            if any(loads(value) & set(names[:i]) for i, value in enumerate(v.elts)):
                return 0
            return len(t.elts)
    return 0


def _single_target(node: ast.stmt, part: int | None) -> ast.expr | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        t = node.targets[0]
        if part is not None and isinstance(t, ast.Tuple | ast.List):
            return t.elts[part]
        return t
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.target
    return None


def _single_value(node: ast.stmt, part: int | None) -> ast.expr | None:
    if isinstance(node, ast.Assign):
        if part is not None and isinstance(node.value, ast.Tuple | ast.List):
            return node.value.elts[part]
        return node.value
    if isinstance(node, ast.AnnAssign):
        return node.value
    return None


# -- what a statement binds, changes and reads ------------------------------------------------


def base_name(node: ast.expr) -> str | None:
    """``x`` for ``x``, ``x[i]``, ``x.data``, ``x[i][j]``."""
    while isinstance(node, ast.Subscript | ast.Attribute | ast.Starred):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def loads(node: ast.AST, bound: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """Names an expression (or statement) reads that it does not bind itself, ``bound`` aside.
    Comprehension targets, lambda and function parameters are local to them."""
    out: set[str] = set()
    _loads(node, set(bound), out)
    return out


def _loads(node: ast.AST, bound: set[str], out: set[str]) -> None:
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in bound:
            out.add(node.id)
        return
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        inner = set(bound)
        for gen in node.generators:
            _loads(gen.iter, inner, out)
            inner |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            for cond in gen.ifs:
                _loads(cond, inner, out)
        elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for e in elts:
            _loads(e, inner, out)
        return
    if isinstance(node, ast.Lambda):
        for d in [*node.args.defaults, *node.args.kw_defaults]:
            if d is not None:
                _loads(d, bound, out)
        _loads(node.body, bound | _arg_names(node.args), out)
        return
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        for d in [*node.args.defaults, *node.args.kw_defaults, *node.decorator_list]:
            if d is not None:
                _loads(d, bound, out)
        local = bound | _arg_names(node.args) | _stores(node.body)
        for stmt in node.body:
            _loads(stmt, local, out)
        return
    for child in ast.iter_child_nodes(node):
        _loads(child, bound, out)


def _arg_names(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _stores(body: Iterable[ast.stmt]) -> set[str]:
    """Names a function body binds (its locals)."""
    out: set[str] = set()
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
    return out


def analyse(node: ast.stmt, part: int | None = None) -> tuple[frozenset[str], ...]:
    """``(defs, mods, reads)`` of one statement (see the module docstring)."""
    defs: set[str] = set()
    mods: set[str] = set()
    reads: set[str] = set()
    _statement(node, part, set(), defs, mods, reads)
    if part is None:
        mods |= _hidden_rebindings(node)
    return frozenset(defs), frozenset(mods), frozenset(reads)


NAMESPACE_CALLS = frozenset({"globals", "locals", "vars"})


def _hidden_rebindings(node: ast.stmt, depth: int = 0) -> set[str]:
    """Names a statement rebinds where no assignment shows it: ``(dh := dh * 2)`` (a walrus
    binds in this scope, mid-expression), ``globals()['dh'] = ...``, and the statements of
    ``exec('dh = ...')`` with a constant string (read as code, to a few levels)."""
    out: set[str] = set()
    for n in _same_scope(node):
        if isinstance(n, ast.NamedExpr):
            out.add(n.target.id)
        elif (
            isinstance(n, ast.Subscript)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name)
            and n.value.func.id in NAMESPACE_CALLS
            and isinstance(n.slice, ast.Constant)
            and isinstance(n.slice.value, str)
        ):
            out.add(n.slice.value)
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "exec"
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)
            and depth < 3
        ):
            try:
                body = ast.parse(n.args[0].value).body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for stmt in body:
                d: set[str] = set()
                m: set[str] = set()
                _statement(stmt, None, set(), d, m, set())
                out |= d | m | _hidden_rebindings(stmt, depth + 1)
    return out


def _same_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``node``'s descendants, those of function and class bodies and lambdas aside (a walrus in
    a comprehension binds in the scope around it, so comprehensions are walked)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        yield child
        yield from _same_scope(child)


def _bind_target(target: ast.expr, fresh: set[str], mods: set[str]) -> None:
    if isinstance(target, ast.Name):
        fresh.add(target.id)
    elif isinstance(target, ast.Tuple | ast.List):
        for e in target.elts:
            _bind_target(e, fresh, mods)
    elif isinstance(target, ast.Starred):
        _bind_target(target.value, fresh, mods)
    else:  # x[i] = ..., x.data = ...: x is changed, not bound
        name = base_name(target)
        if name is not None:
            mods.add(name)


def _statement(
    node: ast.stmt,
    part: int | None,
    bound: set[str],
    defs: set[str],
    mods: set[str],
    reads: set[str],
) -> None:
    """Accumulate one statement's effects; ``bound`` holds names bound earlier in the block."""
    if isinstance(node, ast.Assign | ast.AnnAssign):
        value = _single_value(node, part)
        if value is None:
            return
        reads |= loads(value, bound)
        fresh: set[str] = set()
        targets = (
            [_single_target(node, part)]
            if part is not None or isinstance(node, ast.AnnAssign)
            else node.targets
        )
        for t in targets:
            if t is None:
                continue
            reads |= loads(t, bound)  # the base of x[i] = ... is read too
            _bind_target(t, fresh, mods)
        selfref = fresh & loads(value)  # x = x + ...: built on, not afresh
        mods |= selfref
        defs |= fresh - selfref
        bound |= fresh
    elif isinstance(node, ast.AugAssign):
        reads |= loads(node.value, bound) | loads(node.target, bound)
        name = base_name(node.target)
        if name is not None:
            if isinstance(node.target, ast.Name) and name not in bound:
                reads.add(name)
            mods.add(name)
    elif isinstance(node, ast.Expr):
        reads |= loads(node.value, bound)
        if isinstance(node.value, ast.Call):
            mods |= _changed_by_call(node.value)
    elif isinstance(node, ast.For | ast.AsyncFor):
        reads |= loads(node.iter, bound)
        inner = set(bound)
        loop: set[str] = set()
        _bind_target(node.target, loop, mods)
        inner |= loop
        _block([*node.body, *node.orelse], inner, defs, mods, reads)
        defs |= loop
    elif isinstance(node, ast.While | ast.If):
        reads |= loads(node.test, bound)
        branches = [*node.body, *node.orelse]
        if isinstance(node, ast.If) and isinstance(node.test, ast.Constant):
            branches = node.body if node.test.value else node.orelse  # `if False:` never runs
        _block(branches, set(bound), defs, mods, reads)
    elif isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            reads |= loads(item.context_expr, bound)
            if item.optional_vars is not None:
                _bind_target(item.optional_vars, defs, mods)
        _block(node.body, set(bound) | defs, defs, mods, reads)
    elif isinstance(node, ast.Try):
        blocks = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
        for b in blocks:
            _block(b, set(bound), defs, mods, reads)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        reads |= loads(node, bound) if not isinstance(node, ast.ClassDef) else set()
        defs.add(node.name)
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            defs.add((alias.asname or alias.name).split(".")[0])
    elif isinstance(node, ast.Delete):
        for t in node.targets:
            name = base_name(t)
            if name is not None:
                mods.add(name)
    else:
        reads |= loads(node, bound)


@dataclass
class Helpers:
    """What the notebook's own functions and classes change in place, as read so far:
    ``functions`` maps a function to the positions of the arguments it fills (``def
    scatter(dC, ...): dC[...] += ...``); ``methods`` holds the methods that change their object
    (``self.out = ...``), ``__call__`` among them."""

    functions: dict[str, frozenset[int]] = field(default_factory=dict)
    methods: set[str] = field(default_factory=set)
    defined: set[str] = field(default_factory=set)  # every def, class and import seen


_HELPERS: contextvars.ContextVar[Helpers | None] = contextvars.ContextVar("helpers", default=None)
_BUILTINS = frozenset(dir(builtins))


def _learn(node: ast.stmt, helpers: Helpers) -> None:
    """Note what a top-level ``def`` or ``class`` changes in place (see :class:`Helpers`)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        params = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
        changed = _changes(node.body, set(params))
        helpers.functions[node.name] = frozenset(i for i, a in enumerate(params) if a in changed)
    elif isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.args.args:
                if item.args.args[0].arg in _changes(item.body, {item.args.args[0].arg}):
                    helpers.methods.add(item.name)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        helpers.defined.add(node.name)
    elif isinstance(node, ast.Import | ast.ImportFrom):
        helpers.defined |= {(a.asname or a.name).split(".")[0] for a in node.names}


def _changes(body: list[ast.stmt], params: set[str]) -> set[str]:
    """Which of ``params`` a function body changes in place (``x += ...``, ``x[i] = ...``,
    ``x.attr = ...``, ``x.add_(...)``)."""
    defs: set[str] = set()
    mods: set[str] = set()
    reads: set[str] = set()
    _block(body, set(), defs, mods, reads)
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and base_name(t) is not None:
                mods.add(cast(str, base_name(t)))  # self.out = ...
    return (mods - defs) & params


def _changed_by_call(call: ast.Call) -> set[str]:
    """The names a call statement fills in place: ``x.index_add_(...)``, ``x.zero_()`` (a
    method ending in ``_``); the first argument of such a method called on the class
    (``torch.Tensor.index_add_(x, ...)``) or of numpy's ``ufunc.at`` (``np.add.at(x, ...)``);
    an ``out=x`` argument (``torch.matmul(a, b, out=x)``); and, from the notebook's own helpers
    (:class:`Helpers`), the arguments a helper function fills and an object whose method (or
    call) changes it (``act(hpreact)`` before ``act.backward(dh)``)."""
    changed = {
        k.value.id for k in call.keywords if k.arg == "out" and isinstance(k.value, ast.Name)
    }
    func = call.func
    helpers = _HELPERS.get()
    if helpers is not None and isinstance(func, ast.Name):
        for i in helpers.functions.get(func.id, ()):  # a helper that fills its arguments
            arg = call.args[i] if i < len(call.args) else None
            if isinstance(arg, ast.Name):
                changed.add(arg.id)
        stateful = "__call__" in helpers.methods and func.id not in helpers.defined
        if stateful and func.id not in _BUILTINS:  # act(hpreact): an object of the notebook's
            changed.add(func.id)
    if not isinstance(func, ast.Attribute):
        return changed
    if helpers is not None and func.attr in helpers.methods:  # layer.forward(x)
        name = base_name(func.value)
        if name is not None:
            changed.add(name)
    first = call.args[0] if call.args and isinstance(call.args[0], ast.Name) else None
    in_place = func.attr.endswith("_") and not func.attr.startswith("_")
    on_the_class = isinstance(func.value, ast.Attribute) and func.value.attr == "Tensor"
    if in_place and not on_the_class:
        name = base_name(func.value)
        if name is not None:
            changed.add(name)
    if first is not None and ((in_place and on_the_class) or func.attr == "at"):
        changed.add(first.id)
    return changed


def _block(
    body: list[ast.stmt], bound: set[str], defs: set[str], mods: set[str], reads: set[str]
) -> None:
    """A block's statements in order: what one binds, the next does not read from outside."""
    for stmt in body:
        d: set[str] = set()
        m: set[str] = set()
        r: set[str] = set()
        _statement(stmt, None, bound, d, m, r)
        reads |= r - bound
        bound |= d | m
        defs |= d - mods
        mods |= m


# -- back to source -------------------------------------------------------------------------


def segment(stmt: Stmt, replace: Mapping[tuple[int, int], tuple[int, str]]) -> str:
    """The statement's own text (its part, for a split tuple assignment), each name at
    ``(line, column)`` in ``replace`` swapped for its ``(end column, text)``; continuation lines
    are dedented by the statement's own indentation."""
    if stmt.part is not None:
        target, value = _single_target(stmt.node, stmt.part), stmt.value
        assert target is not None and value is not None  # a part is always a plain assignment
        return f"{_slice(stmt, target, replace)} = {_slice(stmt, value, replace)}"
    return _slice(stmt, stmt.node, replace)


def _slice(stmt: Stmt, node: ast.AST, replace: Mapping[tuple[int, int], tuple[int, str]]) -> str:
    first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    indent = stmt.node.col_offset
    out: list[str] = []
    for number in range(first, last + 1):
        raw = stmt.source[number - 1]
        lo = start if number == first else 0
        hi = end if number == last and end is not None else len(raw)
        edits = sorted(
            (
                (col, end_col, text)
                for (ln, col), (end_col, text) in replace.items()
                if ln == number
            ),
            reverse=True,
        )
        for col, end_col, text in edits:
            if lo <= col and end_col <= hi:
                raw = raw[:col] + text.encode() + raw[end_col:]
                hi += len(text.encode()) - (end_col - col)
        piece = raw[lo:hi].decode(errors="replace")
        if number != first and indent and piece[:indent].strip() == "":
            piece = piece[indent:]
        out.append(piece)
    return "\n".join(out)


def name_positions(node: ast.AST) -> Iterator[ast.Name]:
    """Every name node in a statement."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            yield n


def lines_words(stmts: Iterable[Stmt]) -> str:
    """Where statements are, in a reader's words: ``cell 12, lines 3-5, 9; cell 14, line 2``."""
    by_cell: dict[int, set[int]] = {}
    for s in stmts:
        by_cell.setdefault(s.cell, set()).update(range(s.lineno, s.end_lineno + 1))
    parts = []
    for cell in sorted(by_cell):
        numbers = sorted(by_cell[cell])
        runs: list[list[int]] = []
        for n in numbers:
            if runs and n == runs[-1][-1] + 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
        word = "line" if len(numbers) == 1 else "lines"
        parts.append(f"cell {cell}, {word} {text}")
    return "; ".join(parts)

"""Recognising answers that are plain tensor arithmetic, which may share a process.

Every step of a submission runs in a process of its own unless its code is *plain*: a static,
conservative check of the syntax tree that the code can only compute with the tensors and sizes it
is given. Plain code has no imports, definitions, ``with``, ``try``, ``raise``, ``global``,
``del``; reads no name or attribute that starts with ``_``; assigns to names and subscripts only
(never to an attribute); reads only names it assigned itself, names of the step's namespace, and a
few pure builtins; and reads only attributes from a list of pure tensor, ``torch`` and
``torch.nn.functional`` names (not ``empty``, whose values are whatever memory an earlier step
freed). Such code cannot monkeypatch, leave a process or thread behind, stash anything where a
later step could find it, or reach the grader's objects, so the plain steps of one submission run
one after another in one process (each case still gets fresh clones of its tensors). Anything else
(autograd, ``setattr``, a ``lambda``, an unknown method) runs in a process of its own: being plain
is about speed, never about the grade.

Deciding which answers share a process is the grader's scheduling decision: the sandbox only
does what each job says.
"""

from __future__ import annotations

import ast
from collections.abc import Set

BUILTINS = frozenset(
    {
        "range",
        "len",
        "int",
        "float",
        "abs",
        "min",
        "max",
        "sum",
        "enumerate",
        "zip",
        "list",
        "tuple",
        "round",
        "bool",
        "print",
        "reversed",
        "sorted",
        "True",
        "False",
        "None",
    }
)

ATTRIBUTES = frozenset(
    """
T mT shape dtype ndim values indices
sum mean max min amax amin argmax argmin exp log tanh sigmoid pow sqrt rsqrt reciprocal abs sign
neg square clone view view_as reshape reshape_as flatten unsqueeze squeeze expand expand_as repeat
permute transpose t contiguous float double long int bool size numel dim item
zero_ fill_ add_ sub_ mul_ div_ index_add_ index_add index_put_ index_put scatter_add_ scatter_add
scatter_ scatter gather masked_fill masked_fill_ index_select matmul mm bmm outer dot add sub mul
div new_zeros new_ones new_full eq ne gt lt ge le where clamp clamp_ maximum minimum cumsum prod
bincount nonzero split chunk unbind flip diag diagonal triu tril sort topk copy_ narrow select
zeros zeros_like ones ones_like full full_like arange tensor as_tensor eye cat
stack einsum diag_embed broadcast_to tile repeat_interleave logical_and float32 float64 int64
one_hot softmax log_softmax keepdim
""".split()
)
"""Attribute names plain code may read, on any object (all are pure tensor operations)."""

_NODES = (
    ast.Module,
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.Break,
    ast.Continue,
    ast.Pass,
    ast.Compare,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.Constant,
    ast.keyword,
    ast.ListComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.Load,
    ast.Store,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
    ast.expr_context,
)


def is_plain(code: str, provided: Set[str]) -> bool:
    """True when ``code`` is plain tensor arithmetic (see the module docstring); ``provided``
    holds the names a step's namespace may hold (:attr:`Exercise.provided`)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    assigned = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            return False
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                return False
            if (
                isinstance(node.ctx, ast.Load)
                and node.id not in assigned
                and node.id not in provided
                and node.id not in BUILTINS
            ):
                return False
        elif isinstance(node, ast.Attribute):
            if not isinstance(node.ctx, ast.Load) or node.attr not in ATTRIBUTES:
                return False
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            return False
    return True

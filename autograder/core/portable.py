"""The kit's math that a notebook runs too: pure functions of torch tensors and plain data.

This module imports only the standard library and torch, and nothing of the kit, because its
source is placed verbatim in each released notebook, whose checks run the same forward pass,
parameters, references and evidence tests as the grader (a notebook needs only torch). The kit
itself imports these functions from here: one implementation, two places it runs.

A forward pass here is a list of ``(variable, expression)`` pairs, each expression the right-
hand side of a line of the exercise, evaluated with :func:`evaluate` in a namespace holding the
graph so far and ``torch``/``F``.

Why one module of this length: a released notebook embeds this one source, so everything its
checks share with the grader lives here: the math, the evidence tests, and the static rule on
an answer's names (:func:`tokens`, :func:`tamper_names`), which reads code as the compiler does.
"""

from __future__ import annotations

import ast
import io
import math
import re
import sys
import tokenize
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

MODULES: dict[str, Any] = {"torch": torch, "F": F}
"""The modules a forward line may use."""

_CODE: dict[str, Any] = {}


def evaluate(expression: str, namespace: Mapping[str, Any]) -> Any:
    """The value of one forward line's expression over ``namespace`` (compiled once)."""
    code = _CODE.get(expression)
    if code is None:
        code = _CODE[expression] = compile(expression, "<forward>", "eval")
    return eval(code, dict(MODULES), dict(namespace))


def reads(expression: str) -> frozenset[str]:
    """Every name an expression reads."""
    tree = ast.parse(expression, mode="eval")
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))


def parse(code: str | ast.Module | None) -> ast.Module | None:
    """The code's syntax tree (a tree is passed through, so one parse serves several rules), or
    None when it is not Python, or too deep or too odd to parse."""
    if not isinstance(code, str):
        return code
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def bound_names(source: str | ast.Module | None) -> set[str]:
    """The names a piece of code binds itself (assigned, defined, parameters): its own
    variables (a temporary called ``backward`` is not autograd's)."""
    tree = parse(source)
    if tree is None:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return out


def tokens(code: str) -> list[tokenize.TokenInfo]:
    """The code's tokens (comments, strings and a broken tail are simply left out), read as
    Python reads them: each name NFKC-normalised (``ｇｅｔａｔｔｒ`` is ``getattr``), a lone
    ``\r`` a line break (tokenize would take the line after it for blank), and the code inside
    an f-string's braces tokens too, each piece followed by a ``;`` (Pythons before 3.12 give an
    f-string as one string token)."""
    code = _as_compiled(code.replace("\r\n", "\n").replace("\r", "\n"))
    out: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME and not tok.string.isascii():
                tok = tok._replace(string=unicodedata.normalize("NFKC", tok.string))
            if tok.type == tokenize.STRING:
                out += _fstring_code(tok)
            out.append(tok)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return [t for t in out if t.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP)]


def _as_compiled(code: str) -> str:
    """``code`` with every character that may stand in a name NFKC-normalised, as the compiler
    normalises names: tokenize splits ``f＿back`` (a full-width low line) where Python reads
    ``f_back``. Other characters stay (a full-width quote is no quote to the compiler)."""
    if code.isascii():
        return code
    return "".join(
        c if c.isascii() or not ("a" + c).isidentifier() else unicodedata.normalize("NFKC", c)
        for c in code
    )


def _fstring_code(tok: tokenize.TokenInfo) -> list[tokenize.TokenInfo]:
    """The tokens of the expressions inside an f-string token's braces (none for a plain
    string), each expression's followed by a ``;``."""
    prefix = tok.string[: len(tok.string) - len(tok.string.lstrip("rRbBuUfF"))]
    if "f" not in prefix.lower():
        return []
    try:
        tree = ast.parse(tok.string, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[tokenize.TokenInfo] = []
    end = tokenize.TokenInfo(tokenize.OP, ";", tok.start, tok.end, tok.line)
    for value in _fields(tree.body):
        out += [t._replace(start=tok.start, end=tok.end) for t in tokens(ast.unparse(value))]
        out.append(end)
    return out


def _fields(node: ast.expr) -> list[ast.expr]:
    """The expressions of an f-string's replacement fields, those of their format specs too
    (an f-string inside one is the tokens' business: it is a string token again)."""
    if not isinstance(node, ast.JoinedStr):
        return []
    out: list[ast.expr] = []
    for part in node.values:
        if isinstance(part, ast.FormattedValue):
            out.append(part.value)
            if part.format_spec is not None:
                out += _fields(part.format_spec)
    return out


def identifiers(code: str | ast.Module | None) -> set[str]:
    """Every identifier the compiler reads in ``code`` (names, attributes, parameters,
    keywords, imports; NFKC-normalised as Python does), or none when it does not parse."""
    tree = parse(code)
    if tree is None:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg is not None:
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out |= set(node.name.split(".")) | ({node.asname} if node.asname else set())
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= set(node.module.split("."))
        elif isinstance(node, ast.Global | ast.Nonlocal):
            out |= set(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
        elif isinstance(node, ast.MatchClass):
            out |= set(node.kwd_attrs)
    out.discard("*")
    return out


HARMLESS_AUTOGRAD = re.compile(
    r"\.grad\s*=\s*None\b|set_grad_enabled\(\s*False\s*\)|\.requires_grad\b(?!\s*=[^=])"
    r"|\brequires_grad\s*=\s*False\b"
)
"""Autograd's names in code that uses nothing of it: ``p.grad = None`` (the lecture's own
training loop clears gradients so), ``torch.set_grad_enabled(False)`` (grad mode off),
``x.requires_grad`` read (``print(counts.requires_grad)``), not set, and
``torch.zeros_like(x, requires_grad=False)``."""

_SELF_ATTRIBUTE = r"\bself\.({})\b"


def without_harmless_autograd(code: str) -> str:
    """``code`` with :data:`HARMLESS_AUTOGRAD` blanked out, for the autograd name checks, and
    ``self.grad`` / ``self.func`` where the code sets them itself (a class of its own, micrograd
    style, keeps a ``grad`` of its own)."""
    code = HARMLESS_AUTOGRAD.sub(lambda m: " " * len(m.group()), code)
    own = [a for a in ("grad", "func") if re.search(rf"\bself\.{a}\s*=[^=]", code)]
    if own:
        code = re.sub(_SELF_ATTRIBUTE.format("|".join(own)), lambda m: " " * len(m.group()), code)
    return code


def own_functions(code: str | ast.Module | None) -> set[str]:
    """The functions and methods the code defines itself: ``Tanh(h).backward(dh)`` calls the
    code's own ``backward``, not autograd's (autograd's own is poisoned at run time anyway)."""
    tree = parse(code)
    if tree is None:
        return set()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    return {node.name for node in ast.walk(tree) if isinstance(node, kinds)}


TAMPER_BUILTINS = frozenset(
    {"getattr", "setattr", "delattr", "vars", "eval", "exec", "compile", "globals", "locals"}
    | {"breakpoint", "open"}
)
"""Built-in functions that turn strings into attributes or code, or open files (an answer's
own channels among them): refused wherever they occur."""

TAMPER_NAMES = frozenset(
    {"_getframe", "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gc", "inspect"}
    | {"ctypes", "ctypeslib", "cell_contents", "settrace", "setprofile", "getprofile"}
    | {"next_functions", "AccumulateGrad"}  # (dunders, __closure__ say, are refused by a rule)
    # modules and functions that reach attributes by strings, run code, or the process itself
    | {"importlib", "builtins", "os", "posix", "nt", "subprocess", "signal", "operator", "types"}
    | {"attrgetter", "methodcaller", "getattr_static", "pickle", "marshal", "copyreg", "mmap"}
    | {"socket", "threading", "multiprocessing", "dup2", "data_ptr", "cpp_extension"}
    | {"weights_only", "pickle_module", "string", "Formatter", "get_field", "pkgutil"}
    | {"resolve_name", "pydoc", "unittest", "mock", "runpy", "code", "codeop", "sysconfig"}
    | {"get_type_hints", "singledispatch", "singledispatchmethod", "ForwardRef"}
    | {"allow_pickle", "read_array"}  # numpy's unpickling (np.load of an object array)
    # functions of allowed modules that read or set attributes named by strings, or run strings
    | {"update_wrapper", "wraps", "make_dataclass", "measure", "infer_schema", "Timer"}
    | {"timeit", "crackfortran", "myeval"}
    # evaluating annotations, finding modules by name, dotted names resolved (torch re-exports
    # inspect's signature and importlib's find_spec under its own modules)
    | {"signature", "eval_str", "get_annotations", "getmembers", "find_spec", "load_module"}
    | {"exec_module", "module_from_spec", "spec_from_file_location", "spec_from_loader"}
    | {"run_path", "run_module", "set_default_tensor_type", "import_module"}
    | {"getmembers_static", "importorskip"}
)
"""Names with which code reaches into the interpreter, the process or the grader instead of
computing: a gradient needs none of them (a variable of the answer's own by one of these names
is its own: ``types = ...``)."""

TAMPER_ATTRIBUTES = frozenset(
    {"load_inline", "load_library", "modules", "meta_path", "path_hooks", "addaudithook"}
    | {"exc_info", "exception", "last_traceback", "last_value", "last_exc", "locate"}
    | {"register", "load", "loads", "jit", "hub", "package", "serialization"}  # loading code
    | {"fx"}  # torch.fx: fetch_attr takes a dotted string; its code generation runs names
    | {"sys", "path_importer_cache", "breakpointhook", "displayhook", "excepthook"}
    | {"unraisablehook", "call_tracing"}  # sys's ways in, reached through another module
    # torch's and numpy's submodules that are not for computing: several run strings as code
    # (np.testing.measure, torch.utils.benchmark, numpy.f2py) or read attributes by strings
    | {"testing", "utils", "library", "distributed", "export", "compiler", "onnx", "profiler"}
    | {"overrides", "backends", "f2py", "distutils", "lib", "core", "compat", "ao"}
    | {"quantization", "benchmark"}
    # an AttributeError's object (a lookup by a string that failed hands over what it reached),
    # and standard modules that torch and re re-export under names of their own (those under
    # their own names, torch.storage.io say, are STDLIB_REFUSED)
    | {"obj", "mp", "spawn", "bltns"}
    | {"tests"}  # numpy's test modules hold pytest, operator and more
)
"""Names that reach outside as attributes only: a traceback leads to frames, ``np.load``,
``torch.load``, ``torch.jit`` or ``torch.hub`` turn bytes or files into objects or code, and
``torch.fx`` reaches attributes by dotted strings."""

INTERNAL_PREFIXES = ("f_", "co_", "gi_", "cr_", "ag_", "tb_")
"""Attributes of frames, code objects, generators, coroutines and tracebacks (``gi_frame``,
``f_back``, ``co_names``): the way from an answer's own generator to the runner's frames, or to
code rewritten with other names. Refused as attributes."""

SYS_ALLOWED = frozenset(
    {"stdout", "stderr", "float_info", "int_info", "maxsize", "version", "version_info"}
    | {"getsizeof", "byteorder", "platform", "getrecursionlimit"}
)
"""What an answer may read of ``sys`` (printing, sizes, versions), as ``sys.<name>`` only: the
module holds the interpreter's own ways in (``sys.modules``, ``sys.path_importer_cache``, which
loads a module by a string, the profile hook that watches grad mode, hooks), so ``sys`` itself
may not be passed around, aliased or imported from otherwise."""

DUNDERS_ALLOWED = frozenset(
    {"__name__", "__init__", "__call__", "__repr__", "__str__", "__len__", "__iter__"}
    | {"__next__", "__getitem__", "__setitem__", "__contains__", "__neg__", "__pos__", "__abs__"}
    | {f"__{r}{op}__" for r in ("", "r", "i") for op in ("add", "sub", "mul", "truediv")}
    | {f"__{r}{op}__" for r in ("", "r", "i") for op in ("matmul", "pow")}
)
"""Dunders that reach nothing: ``type(x).__name__`` in a debugging print, and those a class of
the answer's own defines (``__init__``, arithmetic: a micrograd-style ``Value``)."""

PRIVATE_ALLOWED = ("_foreach_",)
"""Private torch attributes that only compute (``torch._foreach_add_``, an update's)."""

IMPORTS_ALLOWED = frozenset(
    {"torch", "math", "cmath", "numpy", "einops", "itertools", "functools", "collections"}
    | {"typing", "random", "time", "warnings", "sys", "statistics", "numbers"}
    | {"copy", "fractions", "decimal", "pprint", "re", "json"}
)
"""The modules an answer may import: computing and printing. Any other import is refused: the
standard library holds many ways to reach attributes by strings or run code, and plotting
(``matplotlib``) cannot be loaded where answers run, so an answer that plots fails in the
notebook's check as it would in the grader."""

MODULES_ALLOWED = IMPORTS_ALLOWED | frozenset(
    {"torch.nn", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft"}
    | {"numpy.linalg", "numpy.random", "numpy.fft", "collections.abc"}
)
"""The exact modules an answer may import, or import names from (only the top of the path
checked, ``numpy.tests.test_warnings`` would hand out ``pytest``)."""

STDLIB_REFUSED = (
    frozenset(sys.stdlib_module_names)
    - IMPORTS_ALLOWED
    - {
        *("array", "chunk", "copy", "select", "trace")  # also names of torch's or numpy's functions
    }
)
"""Standard modules an answer may not import, refused as attributes and imported names too:
torch and numpy hold many as globals (``torch.nn.functional.dataclasses``, ``torch.storage.io``,
``torch.cuda.traceback``), where an allowed import would hand them out."""

IMPORTED_NAMES_REFUSED = TAMPER_NAMES | TAMPER_BUILTINS | TAMPER_ATTRIBUTES | STDLIB_REFUSED
"""Names an answer may not import from an allowed module: an imported name obeys the rules of
names and of attributes both (``from torch import fx`` is ``torch.fx``)."""

IMPORTS_FROM_ALLOWED = frozenset({"IPython.display"})
"""Modules whose names an answer may import (``from IPython.display import display``), though
not the module itself (``IPython`` holds ways to import by a string)."""


def tamper_names(code: str, also: frozenset[str] = frozenset()) -> list[str]:
    """Names of interpreter, process or grader internals the code mentions (comments and strings
    ignored): :data:`TAMPER_BUILTINS`; the names of :data:`TAMPER_NAMES` (but one the code binds
    itself by assignment, a variable called ``types`` say, is its own where no dot precedes it);
    any dunder (``__class__``); any private attribute (``torch._C``, ``os._exit``) but a few
    that only compute; ``inference_mode`` anywhere but in ``inference_mode()`` or
    ``inference_mode(True)`` (``inference_mode(False)`` turns grad mode on); a module imported
    that is not in :data:`IMPORTS_ALLOWED`, or a refused name imported from one that is;
    ``also``: more names to refuse wherever they occur."""
    found: list[str] = []
    toks = tokens(code)
    tree = parse(code)  # one parse for every rule that reads the tree
    own = bound_names(tree)
    for i, tok in enumerate(toks):
        if tok.type != tokenize.NAME or tok.string in found:
            continue
        name = tok.string
        attribute = i > 0 and toks[i - 1].string == "."
        call = [t.string for t in toks[i + 1 : i + 4]]
        if (
            name in TAMPER_BUILTINS
            or name in also
            or (name in TAMPER_NAMES and (attribute or name not in own))
            or (name.startswith("__") and name.endswith("__") and name not in DUNDERS_ALLOWED)
            or (
                attribute
                and (
                    name in TAMPER_ATTRIBUTES
                    or name in STDLIB_REFUSED
                    or name.startswith(INTERNAL_PREFIXES)
                )
            )
            or (
                attribute
                and name.startswith("_")
                and not name.startswith(PRIVATE_ALLOWED)
                and name not in DUNDERS_ALLOWED
            )
            or (name == "inference_mode" and call[:2] != ["(", ")"] and call != ["(", "True", ")"])
            or (name == "type" and _arguments(toks, i + 1) >= 3)
        ):
            found.append(name)
    for name in [*_imported(tree), *_by_tree(tree)]:
        if name not in found:
            found.append(name)
    seen = {t.string for t in toks if t.type == tokenize.NAME}
    for name in sorted(identifiers(tree) - seen):  # code this scan cannot read: hidden
        if name not in found:
            found.append(name)
    return found


def _by_tree(tree: ast.Module | None) -> list[str]:
    """What :func:`tamper_names` refuses as the compiler reads it: ``sys`` but as
    ``sys.<name of SYS_ALLOWED>`` (or ``import sys``); a string that is a dunder name
    (``{"__getattr__": f}`` handed to ``type``); ``__name__`` assigned (code generation pastes
    names into source)."""
    if tree is None:
        return []
    refused: list[str] = []
    on_sys = {  # the sys Name nodes read as sys.<attribute>: the attribute
        id(node.value): node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "sys":
            attr = on_sys.get(id(node))
            if attr not in SYS_ALLOWED:
                refused.append(f"sys.{attr}" if attr else "sys")
        elif isinstance(node, ast.Import):
            refused += ["sys" for a in node.names if a.name == "sys" and a.asname]
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            refused += [f"sys.{a.name}" for a in node.names if a.name not in SYS_ALLOWED]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and DUNDER.fullmatch(node.value)
            and node.value not in DUNDERS_ALLOWED | {"__main__"}
        ):
            refused.append(node.value)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "__name__"
            and not isinstance(node.ctx, ast.Load)
        ):
            refused.append("__name__")
        elif isinstance(node, ast.Attribute) and node.attr in ("format", "format_map"):
            template = node.value
            if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
                refused.append(f"str.{node.attr}")  # a template made at run time
            elif _walks_attributes(template.value):
                refused.append(f"str.{node.attr}")
    return list(dict.fromkeys(refused))


def _walks_attributes(template: str) -> bool:
    """Whether a ``str.format`` template reaches attributes of its arguments (``"{0.x}"``), in
    its fields or their nested format specs: a lookup by a string (items, ``"{0[k]}"``, are
    only the argument's own). A template that does not parse is taken as walking."""
    import string as formatting  # parse only splits the template; nothing is looked up

    todo = [template]
    while todo:
        try:
            fields = list(formatting.Formatter().parse(todo.pop()))
        except (ValueError, IndexError):
            return True
        for _, field, spec, _ in fields:
            if field and "." in field:
                return True
            if spec and "{" in spec:
                todo.append(spec)
    return False


DUNDER = re.compile(r"__[A-Za-z0-9_]+__")


def _imported(tree: ast.Module | None) -> list[str]:
    """What the code imports that :func:`tamper_names` refuses: a module that is not exactly
    one of :data:`MODULES_ALLOWED` (``numpy.tests.test_warnings`` is not ``numpy``; a relative
    import neither), or a name from an allowed one that the attribute rules refuse
    (``from torch import fx``, ``from torch import sys as S``, ``from torch.nn.functional import
    dataclasses``)."""
    if tree is None:
        return []
    refused: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            modules = ["." * node.level + (node.module or "")]
            names = [a.name for a in node.names]
        else:
            continue
        refused += [
            m
            for m in modules
            if m not in MODULES_ALLOWED
            and not (isinstance(node, ast.ImportFrom) and m in IMPORTS_FROM_ALLOWED)
        ]
        refused += [
            n
            for n in names
            if n in IMPORTED_NAMES_REFUSED
            or n.startswith(("_", *INTERNAL_PREFIXES))
            or (n == "sys" and modules != ["sys"])  # the sys module under another name
        ]
    if any(isinstance(node, ast.MatchClass) for node in ast.walk(tree)):
        refused.append("match")  # a class pattern reads the attributes its class names
    return refused


def _arguments(toks: list[tokenize.TokenInfo], i: int) -> int:
    """How many arguments the call whose ``(`` is at ``i`` has (0 if there is no call): three
    make ``type(name, bases, namespace)`` a class with attributes named by strings."""
    if i + 1 >= len(toks) or toks[i].string != "(" or toks[i + 1].string == ")":
        return 0
    depth, count = 0, 1
    for tok in toks[i:]:
        if tok.string in ("(", "[", "{"):
            depth += 1
        elif tok.string in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                break
        elif tok.string == "," and depth == 1:
            count += 1
    return count


def carries_over(code: str, name: str) -> bool:
    """Whether ``code`` reads ``name`` before it binds it (``x += ...`` reads it), in source
    order: it builds on whatever ``name`` held before it ran, which in a training loop is the
    previous iteration's value. Only the cell's own flow counts: a function or lambda it defines
    (``def acc(ix, d): dC[ix] += d`` before ``dC = torch.zeros_like(C)``) reads when called."""
    tree = parse(code)
    if tree is None:
        return False
    scope = _own_scope(tree)
    late = {  # an assignment binds after its value is computed: `x = x + 1` reads x first
        id(target): (node.end_lineno or 0, node.end_col_offset or 0)
        for node in scope
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for target in ast.walk(t)
    }
    uses = []
    for node in scope:
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name:
                uses.append((node.lineno, node.col_offset, True))
        elif isinstance(node, ast.Name) and node.id == name:
            at = late.get(id(node), (node.lineno, node.col_offset))
            uses.append((*at, isinstance(node.ctx, ast.Load)))
    uses.sort(key=lambda u: (u[0], u[1]))
    return bool(uses) and uses[0][2]


def _own_scope(node: ast.AST) -> list[ast.AST]:
    """``node`` and its descendants, but not the bodies of the functions, lambdas and classes
    it defines (their code runs later, when called)."""
    out, todo = [], [node]
    while todo:
        current = todo.pop()
        out.append(current)
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                if not isinstance(child, ast.ClassDef):
                    todo.append(child)
    return out


def init_params(cfg: Any, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Parameters as in the lecture, all drawn from ``g`` (bngain and bnbias too); ``cfg`` has
    the attributes ``vocab_size``, ``block_size``, ``n_embd`` and ``n_hidden``.

    None is 0 or 1: b1, b2 and bnbias are small random values and bngain is ``1 + 0.1 * N(0, 1)``,
    because exact zeros and ones hide wrong answers (a missing ``bngain *`` factor, say).
    """
    fan_in = cfg.n_embd * cfg.block_size
    return {
        "C": torch.randn((cfg.vocab_size, cfg.n_embd), generator=g),
        "W1": torch.randn((fan_in, cfg.n_hidden), generator=g) * (5 / 3) / fan_in**0.5,
        "b1": torch.randn(cfg.n_hidden, generator=g) * 0.1,
        "W2": torch.randn((cfg.n_hidden, cfg.vocab_size), generator=g) * 0.1,
        "b2": torch.randn(cfg.vocab_size, generator=g) * 0.1,
        "bngain": torch.randn((1, cfg.n_hidden), generator=g) * 0.1 + 1.0,
        "bnbias": torch.randn((1, cfg.n_hidden), generator=g) * 0.1,
    }


def repeats_batch(
    vocab_size: int, batch_size: int, block_size: int, uses: Sequence[int], g: torch.Generator
) -> torch.Tensor:
    """A batch ``Xb`` whose rows of the table are used exactly ``uses`` times (rows and
    positions shuffled): one row many times, a few several times, many once."""
    rows = torch.randperm(vocab_size, generator=g)[: len(uses)]
    flat = torch.cat([torch.full((k,), int(r)) for r, k in zip(rows, uses, strict=True)])
    if flat.numel() != batch_size * block_size:
        raise ValueError("the uses must fill the batch exactly")
    flat = flat[torch.randperm(flat.numel(), generator=g)]
    return flat.view(batch_size, block_size)  # (n, block_size)


def sizes_of(params: Mapping[str, torch.Tensor], Xb: torch.Tensor) -> dict[str, int]:
    """The sizes a namespace holds, read from the tensors themselves; ``batch_size`` is ``n``
    under the lecture's own name (its setup defines both, and learners use either)."""
    vocab_size, n_embd = params["C"].shape
    return {
        "n": int(Xb.shape[0]),
        "batch_size": int(Xb.shape[0]),
        "vocab_size": int(vocab_size),
        "block_size": int(Xb.shape[1]),
        "n_embd": int(n_embd),
        "n_hidden": int(params["W1"].shape[1]),
    }


def run_forward(
    lines: Sequence[tuple[str, str]],
    params: Mapping[str, torch.Tensor],
    Xb: torch.Tensor,
    Yb: torch.Tensor,
) -> dict[str, Any]:
    """The whole graph: sizes, the batch, the parameters and every line's value."""
    t: dict[str, Any] = {**sizes_of(params, Xb), "Xb": Xb, "Yb": Yb, **params}
    for var, expression in lines:
        t[var] = evaluate(expression, t)
    return t


def autograd_gradients(
    lines: Sequence[tuple[str, str]],
    graph: Mapping[str, Any],
    leaves: Sequence[str],
    keep: Sequence[str],
    root: str = "loss",
) -> dict[str, torch.Tensor]:
    """Autograd's gradient of ``root`` for every name of ``keep`` (``"d" + name``), through the
    whole pass, recomputed from ``leaves`` (the parameters) and everything else in ``graph``."""
    t: dict[str, Any] = {k: v for k, v in graph.items() if not isinstance(v, torch.Tensor)}
    t.update({k: v for k, v in graph.items() if k not in leaves and k not in dict(lines)})
    t.update({k: graph[k].detach().clone().requires_grad_() for k in leaves})
    with torch.enable_grad():
        for var, expression in lines:
            t[var] = evaluate(expression, t)
            if var != root and t[var].requires_grad:
                t[var].retain_grad()
        t[root].backward()
    out = {}
    for name in keep:
        grad = t[name].grad
        out["d" + name] = torch.zeros_like(graph[name]) if grad is None else grad.detach()
    return out


def partial_vjp(
    lines: Sequence[tuple[str, str]],
    graph64: Mapping[str, Any],
    var: str,
    held: set[str],
    consumer: str,
    upstream: torch.Tensor,
) -> torch.Tensor:
    """``J^T upstream`` for ``consumer`` with respect to ``var``: the forward lines that depend
    on ``var`` on the way to ``consumer`` are re-evaluated with ``var`` as a leaf, the ``held``
    variables (the step's other consumers) and everything else taken from ``graph64``."""
    leaf = graph64[var].detach().clone().requires_grad_(True)
    t = dict(graph64)
    t[var] = leaf
    live = {var}
    with torch.enable_grad():
        for name, expression in lines:
            if name not in held and reads(expression) & live:
                t[name] = evaluate(expression, t)
                live.add(name)
            if name == consumer:
                break
        if consumer not in live:  # the consumer does not depend on the variable at all
            return torch.zeros_like(leaf).detach()
        # J^T g is the gradient of the scalar <out, g>. (Passing g as grad_outputs instead would
        # make torch import its symbolic-shapes machinery, half a second per grading process.)
        (grad,) = torch.autograd.grad((t[consumer] * upstream).sum(), leaf, allow_unused=True)
    return torch.zeros_like(leaf).detach() if grad is None else grad.detach()


def to_float64(graph: Mapping[str, Any]) -> dict[str, Any]:
    """The same values in float64; integer tensors (Xb, Yb) and sizes are kept as they are."""
    return {
        k: v.detach().double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in graph.items()
    }


# --- evidence: how an answer relates to the reference -------------------------------------------

FLOOR = 10.0
"""A target whose largest entry is below ``FLOOR * tol`` is treated as zero in that case."""

CLOSE = 2e-3
"""Relative agreement required between a fitted factor and a named one (``(n-1)/n``, ``2``...):
fits are accurate to about ``RTOL`` relative, while the nearest named factors differ by >1%."""


def as64(t: torch.Tensor) -> torch.Tensor:
    """The answer as float64 (integer and bool answers too), for comparison with references."""
    return t.detach().to(torch.float64)


def close(x: float, y: float) -> bool:
    """``x`` and ``y`` agree to ``CLOSE``, relatively (absolutely when ``y`` is 0)."""
    return abs(x - y) <= CLOSE * max(abs(y), 1e-3 if y == 0 else 0.0)


def maxabs(t: torch.Tensor) -> float:
    """``max |t|`` (0 for an empty tensor, inf when ``t`` holds a nan or an inf)."""
    if t.numel() == 0:
        return 0.0
    m = t.abs().max()
    return float(m) if bool(torch.isfinite(m)) else math.inf


def fit_factor(
    answer: torch.Tensor, target: torch.Tensor, tol: float, base: torch.Tensor | None = None
) -> float | None:
    """The scalar ``c`` with ``answer = base + c * target`` within ``tol * max(1, |c|)``, or None.

    ``c = <a - b, t> / <t, t>`` (least squares). None when the shapes differ, the target is
    negligible (``max |t| <= FLOOR * tol``), or the best ``c`` still leaves a residual above the
    bound: then no single factor explains the answer.
    """
    if answer.shape != target.shape or maxabs(target) <= FLOOR * tol:
        return None
    a = as64(answer) - (base if base is not None else 0.0)
    if not bool(torch.isfinite(a).all()):
        return None
    t = target.flatten()
    c = float(a.flatten() @ t / (t @ t))
    residual = maxabs(a - c * target)
    return c if residual <= tol * max(1.0, abs(c)) else None


def factor_name(factors: Sequence[tuple[float, int]]) -> str | None:
    """Name the factor ``c`` fitted in each failing case, given that case's batch size ``n``.

    Returns ``"bessel"`` when ``c = (n-1)/n`` in every case (``1/n`` written for ``1/(n-1)``),
    ``"bessel-inverse"`` for ``c = n/(n-1)``, ``"missing-1/n"`` for ``c = n``, ``"extra-1/n"``
    for ``c = 1/n``, ``"missing-1/(n-1)"`` for ``c = n-1``, ``"double"`` for ``c = 2``, ``"half"``
    for ``c = 1/2``, ``"constant"`` for any other constant ``c`` (not 0 or 1) shared by all
    cases, and None when the factors follow no such rule (or there are none). A rule in ``n`` is
    only believed when the cases cover two batch sizes or more (with one ``n`` it is a constant).
    """
    if not factors:
        return None
    rules = {
        "bessel": lambda n: (n - 1) / n,
        "bessel-inverse": lambda n: n / (n - 1),
        "missing-1/n": lambda n: float(n),
        "extra-1/n": lambda n: 1.0 / n,
        "missing-1/(n-1)": lambda n: float(n - 1),
    }
    several = len({n for _, n in factors}) > 1
    for name, rule in rules.items():
        if several and all(close(c, rule(n)) for c, n in factors):
            return name
    for name, value in (("double", 2.0), ("half", 0.5)):
        if all(close(c, value) for c, _ in factors):
            return name
    c0 = factors[0][0]
    if not close(c0, 1.0) and not close(c0, 0.0) and all(close(c, c0) for c, _ in factors):
        return "constant"
    return None


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """The shape ``shapes`` broadcast to, or None when they do not broadcast (numpy's rule;
    ``torch.broadcast_shapes`` would import torch's symbolic-shapes machinery, 0.2 s)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(1, rank + 1):
        sizes = {int(s[-i]) for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(reversed(out))


def transposed_match(answer: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    """A 2-D answer of shape ``ref.T.shape`` (not square) whose transpose is the reference."""
    if answer.dim() != 2 or ref.dim() != 2 or answer.shape != ref.T.shape:
        return False
    if answer.shape == ref.shape:
        return False
    return maxabs(as64(answer).T - ref) <= tol


def shape_slip(got: Sequence[int], want: Sequence[int]) -> str:
    """Classify a wrong shape against the variable's shape.

    - ``"missing-keepdim"``: ``got`` is ``want`` without its size-1 dimensions, ``(64,)`` for
      ``(1, 64)``: a sum that dropped the dimension it ran over;
    - ``"extra-keepdim"``: ``got`` is ``want`` with size-1 dimensions added, ``(1, 27)`` for
      ``(27,)``;
    - ``"not-summed"``: same rank, and ``got`` is larger exactly where ``want`` has size 1: the
      broadcast dimension was never summed over;
    - ``"summed"``: same rank, and ``got`` has size 1 exactly where ``want`` is larger: a sum
      over a dimension that was never broadcast;
    - ``"wrong-dim"``: same rank, both have size-1 dimensions but in different places, ``(32, 1)``
      for ``(1, 64)``: the sum ran over the other dimension;
    - ``"reshaped"``: the same number of elements, arranged differently;
    - ``"other"``.
    """
    got, want = tuple(got), tuple(want)
    squeezed = [s for s in got if s != 1]
    if squeezed == [s for s in want if s != 1] and got != want:
        if len(got) < len(want):
            return "missing-keepdim"
        if len(got) > len(want):
            return "extra-keepdim"
    if len(got) == len(want):
        diff = [i for i in range(len(got)) if got[i] != want[i]]
        if diff and all(want[i] == 1 for i in diff):
            return "not-summed"
        if diff and all(got[i] == 1 for i in diff):
            return "summed"
        if diff and 1 in got and 1 in want and any(got[i] == 1 for i in diff):
            return "wrong-dim"
    if math.prod(got) == math.prod(want):
        return "reshaped"
    return "other"


def wrong_rows(
    answer: torch.Tensor, ref: torch.Tensor, uses: torch.Tensor, tol: float
) -> tuple[set[int], set[int]]:
    """Rows of a table's gradient that differ from the reference, and the rows the batch uses
    more than once (``uses[r]`` = how often row ``r`` is used)."""
    if answer.shape != ref.shape or ref.dim() != 2:
        return set(), set()
    per_row = (as64(answer) - ref).abs().amax(dim=1)  # (rows,)
    wrong = {int(r) for r in torch.nonzero(~(per_row <= tol)).flatten()}
    repeated = {int(r) for r in torch.nonzero(uses > 1).flatten()}
    return wrong, repeated


# --- a short training run (Exercise 4) ------------------------------------------------------------

TRAINING_STEPS = 12
"""Iterations of the short training run a ``training`` step is graded by."""

LEARNING_RATE = 0.1
"""The lecture's learning rate."""

PROBE_SEED = 1_000_003
"""The seed of the probe update's parameters and gradients (:func:`probe_update`)."""

PROBE_PARAMETER = 100.0
"""The probe's parameters are this times N(0, 1): large against the step, so that an update
that also scales the parameters (weight decay) moves them visibly more than the step."""

PROBE_GRADIENT = 5.0
"""The probe's gradients are this times N(0, 1): with the lecture's learning rate one step
is N(0, 0.5**2), about the size of the losses the outcome holds beside it."""


PROGRAM_HEADER = "# a training run with the cells of the notebook"
"""The first line of every training program (:func:`training_program`)."""


def training_program(
    lines: Sequence[tuple[str, str]],
    answers: Sequence[str],
    update: str,
    parameters: Sequence[str],
    gradients: Sequence[str],
    result: str,
) -> str:
    """The code of a training run built from a student's cells; ``result`` holds its outcome
    (:func:`autograd_training` is the reference).

    First the update cell runs once on the probe's known parameters and gradients
    (:func:`probe_update`): every parameter must move by ``-lr * grad``, each on its own (an
    update that is wrong for one parameter, ``b1`` say, whose true gradient is about 0, hardly
    moves the losses). Then, from the real parameters and per batch of ``Xbs``/``Ybs``: the
    forward pass, each gradient answer in order, and the update cell (the iteration's number is
    ``i``, as in the lecture's loop: ``lr = 0.1 if i < 100000 else 0.01``); after the last batch the
    forward pass runs once more, on the first batch, so the last update is seen too. ``result``
    is each loss (one per batch, then the last one), then how much the probe moved each
    parameter, flattened, in the order of ``parameters`` (float64)."""
    names, grads = ", ".join(parameters), ", ".join(gradients)
    forward = [f"{var} = {expression}" for var, expression in lines]
    probe = [
        "# one update of known values first: each parameter's step is checked on its own, with",
        "# the forward tensors of the first batch and i at hand (an update that prints the loss)",
        "i, Xb, Yb = 0, Xbs[0], Ybs[0]",
        *forward,
        f"_real = [{names}]",
        f"_g = torch.Generator().manual_seed({PROBE_SEED})",
        f"{names}, = [{PROBE_PARAMETER} * torch.randn(_p.shape, generator=_g) for _p in _real]",
        f"{grads}, = [{PROBE_GRADIENT} * torch.randn(_p.shape, generator=_g) for _p in _real]",
        f"_before = [_p.clone() for _p in [{names}]]",
        f"parameters = [{names}]",
        f"grads = [{grads}]",
        update,
        f"_probe = [(_a.double() - _b.double()).flatten() for _a, _b in zip([{names}], _before)]",
        f"{names}, = _real",
    ]
    body = [*forward, "_losses.append(float(loss))", *answers, f"grads = [{grads}]", update]
    loop = [
        f"parameters = [{names}]",
        "_losses = []",
        "for _iteration in range(Xbs.shape[0]):",
        "    i, Xb, Yb = _iteration, Xbs[_iteration], Ybs[_iteration]",
        "\n".join("    " + line for part in body for line in part.splitlines()),
        "# the loss after the last update",
        "Xb, Yb = Xbs[0], Ybs[0]",
        *forward,
        "_losses.append(float(loss))",
        f"{result} = torch.cat([torch.tensor(_losses, dtype=torch.float64), *_probe])",
    ]
    return "\n".join([PROGRAM_HEADER, *probe, *loop]) + "\n"


def probe_update(
    params: Mapping[str, torch.Tensor], lr: float
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The probe of :func:`training_program`: per parameter (in the order of ``params``) its
    known value before the update, and the step ``-lr * grad`` it must move by (float64), for
    parameters ~ :data:`PROBE_PARAMETER` N(0, 1) and gradients ~ :data:`PROBE_GRADIENT` N(0, 1)
    of the parameters' shapes, drawn as the program draws them."""
    g = torch.Generator().manual_seed(PROBE_SEED)
    before = {k: PROBE_PARAMETER * torch.randn(v.shape, generator=g) for k, v in params.items()}
    grads = {k: PROBE_GRADIENT * torch.randn(v.shape, generator=g) for k, v in params.items()}
    return before, {k: -lr * grads[k].double() for k in params}


def split_training(
    result: torch.Tensor, params: Mapping[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
    """A training run's outcome as its losses and how far the probe moved each parameter (in
    the parameters' shapes); None if it is not of the reference's length."""
    sizes = [v.numel() for v in params.values()]
    steps = result.numel() - sum(sizes)
    if result.dim() != 1 or steps < 0:
        return None
    losses, *parts = torch.split(result, [steps, *sizes])
    return losses, {k: t.view(v.shape) for (k, v), t in zip(params.items(), parts, strict=True)}


def wrong_updates(
    result: torch.Tensor, params: Mapping[str, torch.Tensor], lr: float, tol: float
) -> dict[str, str] | None:
    """The probe parameters a training run's outcome moves wrongly, each with how: ``"none"``
    (left as it was), ``"sign"`` (moved up its gradient), ``"size"`` (by another multiple of
    the step ``-lr * grad``) or ``"other"``; None when the outcome is not of the run's length."""
    split = split_training(result, params)
    if split is None:
        return None
    _, steps = probe_update(params, lr)
    wrong = {}
    for k, moved in split[1].items():
        if maxabs(as64(moved) - steps[k]) <= tol:
            continue
        c = fit_factor(moved, steps[k], tol)
        if c is None:
            wrong[k] = "other" if maxabs(as64(moved)) > tol else "none"
        else:
            wrong[k] = "none" if close(c, 0.0) else "sign" if c < 0 else "size"
    return wrong


def grouped_updates(wrong: Mapping[str, str], words: Mapping[str, str]) -> str:
    """The parameters of :func:`wrong_updates` grouped by how they went wrong, each group led
    by its words: ``words[how]`` for each ``how``."""
    groups = [
        f"{words[how]}: " + ", ".join(f"`{k}`" for k, h in wrong.items() if h == how)
        for how in ("none", "sign", "size", "other")
        if how in wrong.values()
    ]
    return "; ".join(groups)


def autograd_training(
    lines: Sequence[tuple[str, str]],
    params: Mapping[str, torch.Tensor],
    Xbs: torch.Tensor,
    Ybs: torch.Tensor,
    lr: float,
    root: str = "loss",
) -> torch.Tensor:
    """The outcome of the same training run with autograd's gradients (float64): the loss
    before each update ``p -= lr * p.grad``, one per batch, the loss after the last update (on
    the first batch), then the probe's step of each parameter (:func:`probe_update`)."""
    p = {k: v.detach().double().clone() for k, v in params.items()}
    losses = []
    for Xb, Yb in zip(Xbs, Ybs, strict=True):
        leaves = {k: v.clone().requires_grad_() for k, v in p.items()}
        with torch.enable_grad():
            t: dict[str, Any] = {**sizes_of(leaves, Xb), "Xb": Xb, "Yb": Yb, **leaves}
            for var, expression in lines:
                t[var] = evaluate(expression, t)
            losses.append(float(t[root].detach()))
            t[root].backward()
        grads = {
            k: v.grad if v.grad is not None else torch.zeros_like(v) for k, v in leaves.items()
        }
        p = {k: (leaves[k] - lr * grads[k]).detach() for k in p}
    last = run_forward(lines, p, Xbs[0], Ybs[0])
    losses.append(float(last[root]))
    _, steps = probe_update(params, lr)
    probe = [v.flatten() for v in steps.values()]
    return torch.cat([torch.tensor(losses, dtype=torch.float64), *probe])

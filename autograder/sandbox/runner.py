"""The runner: the only program that runs inside a sandbox, and the only one that runs answers.

It is started by :mod:`launch` as a fresh interpreter (``python -I``) inside the sandbox's
namespaces, with this file, :mod:`wire` and :mod:`seccomp` copied beside it: it imports the
standard library and torch, nothing of the kit. The grader talks to it over one stream (fd 3).

**Processes.** The runner (the sandbox's PID 1 where it has a PID namespace) imports torch once
and then, for each submission, forks a *supervisor* and waits for it. The runner never reads a
submission: the supervisor reads its submission's steps from the stream itself, runs them and
answers, then exits; the runner kills whatever is left in the sandbox, empties its scratch and
tells the grader it is idle. Forks of the runner therefore hold the case inputs (which every
submission is given anyway) and never a classmate's code.

**Steps.** The supervisor runs each answer in a child of its own, except answers that the grader
marked *plain* (pure tensor arithmetic), which run one after another in one child; a step that may
have failed there by an earlier step's doing is run again alone (:data:`RERUN`), so no verdict
depends on another step. Where the kernel allows it, the supervisor first puts its submission in
user, PID and mount namespaces of its own (:class:`_Nest`): the answers' processes see no process
of the sandbox to signal, not even their supervisor or the runner, and the submission has a scratch
tmpfs of its own. Each such process leads a session of its own and confines itself further: no new
process or thread (:data:`seccomp.STEP`), an address-space limit, a CPU limit. After each, the
supervisor kills whatever it left and empties the scratch, so no file goes from one step to another
(nor to another submission: the runner empties the sandbox's scratch after each, and where it
cannot, the grader replaces the sandbox).

**Autograd** is *poisoned* once, in the runner, so every child inherits it: grad mode and forward
mode are off, and every entry point that would switch them on or compute a gradient without them
(``torch.autograd``, ``Tensor.backward``, forward-mode duals, functorch's transforms, backward
kernels in ``torch`` and ``torch.ops`` and their Python decompositions, TorchScript, operator
lookups by name) is replaced by a function that first tells the supervisor, on a pipe of its own
(fd :data:`ALARM_FD`), then raises. What reached the supervisor cannot be taken back by the answer.
The ways around the poison are closed as well: threads (which start with grad mode on), a fresh
copy of an extension module (``_imp``), ``ctypes`` by import or by name, the collector's walks over
every object. And after each case, autograd's own count of the graph nodes the process recorded
(``_get_sequence_nr``: no answer can set it back) is compared with the count before: a graph
recorded by any route, grad mode switched on by one of torch's C++ guards say, counts as use. This
is a lesson and a record, not a memory barrier: an answer is arbitrary code in a process of its
own, and one that reads and writes its own memory (``/proc/self/mem``, raw pointers in torch and
numpy) can use autograd's native code unrecorded. That changes its own answers only; the
confinement above is what holds for everything else.

**Answers** are encoded as bytes: a JSON header (one record per case) and the raw bytes of each
answer tensor. The grader validates every field and never unpickles anything.

Why one module of this length: it is copied into every sandbox and may import nothing of the
kit (only :mod:`wire` and :mod:`seccomp`, copied beside it), so the runner, supervisor,
namespaces and poisoning it needs live here.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import gc
import io
import json
import math
import os
import re
import resource
import select
import signal
import struct
import sys
import time
import types
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seccomp
import wire

CONTROL = 3
"""The fd of the stream to the grader."""

ANSWER_FILE = "<answer>"
"""The file name answers are compiled under: tracebacks point into it by line."""

MAX_ELEMENTS = 1 << 24
"""Answers with more elements than this are not sent back (the largest true gradient has ~2000)."""

MAX_REQUEST = 1 << 30
"""Largest frame the runner accepts from the grader (a bank of case inputs)."""

_exit, _write, _getpid = os._exit, os.write, os.getpid

SECCOMP = False
"""Whether the sandbox's seccomp filter is installed (then answers get the stricter one)."""

NEST = os.environ.get("BACKPROP_NINJA_NEST", "1") != "0"
"""Whether a submission's answers run in namespaces of its own (see :class:`_Nest`; tried, and
skipped where the kernel refuses)."""

BANKS: dict[str, list[dict[str, Any]]] = {}
"""Case inputs by bank id: per case, its name, its graph (minus the loss) and its upstream
gradients. Loaded once; every supervisor inherits them."""


# ---------------------------------------------------------------------------------------------
# tensors as bytes


def _tensor(torch: Any, dtype: str, shape: list[int], blob: bytearray) -> Any:
    """A tensor over ``blob`` itself (no copy: wiping the tensor wipes the only copy)."""
    dt = getattr(torch, dtype)
    if not blob:  # frombuffer refuses an empty buffer
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(blob, dtype=dt).reshape(shape)


def load_bank(torch: Any, header: dict[str, Any], blobs: list[bytearray]) -> None:
    """Decode a bank frame: ``{"id", "cases": [{"name", "ints", "tensors": [[name, dtype,
    shape, kind]]}]}`` with one blob per tensor, ``kind`` being "graph" or "upstream"."""
    cases, at = [], 0
    for case in header["cases"]:
        graph: dict[str, Any] = dict(case["ints"])
        upstream: dict[str, Any] = {}
        for name, dtype, shape, kind in case["tensors"]:
            t = _tensor(torch, dtype, shape, blobs[at])
            at += 1
            (graph if kind == "graph" else upstream)[name] = t
        cases.append({"name": case["name"], "graph": graph, "upstream": upstream})
    BANKS[header["id"]] = cases


# ---------------------------------------------------------------------------------------------
# poisoning autograd, once, in the runner (every process that runs answers inherits it)

ALARM_FD = 4
"""In a process that runs answers, the pipe on which poisoned entry points report to the
supervisor. Elsewhere in the sandbox it is /dev/null (nothing there calls them)."""

AUTOGRAD_OP = re.compile(r"backward|grad|dual|fw_primal|jvp|vjp|autograd", re.IGNORECASE)
"""Operator names that belong to autograd: ``aten::tanh_backward``, ``aten::grad``,
``aten::set_grad_enabled``, ``aten::requires_grad_``, ``aten::_make_dual``..."""

FUNCTIONAL_TRANSFORMS: tuple[str, ...] = (
    "grad",
    "grad_and_value",
    "vjp",
    "jvp",
    "jacrev",
    "jacfwd",
    "hessian",
)
FUNCTIONAL_TRANSFORMS = (*FUNCTIONAL_TRANSFORMS, "linearize")
"""functorch's transforms, in ``torch.func`` and its private modules."""

TORCHSCRIPT = re.compile(
    r"^(_jit_(script|trace|interpret|differentiate|to_static|run_cpp|decomposition|"
    r"register_decomposition|pass_create_autodiff|pass_run_decompositions)|_create_(function|"
    r"method|graph)_|import_ir_module|_import_ir_module|_load_(for_lite|jit_module|mobile_"
    r"module)|parse_ir$|_compile_graph_to_code|_pickle_load_obj)"
)
"""``torch._C`` functions that compile, load or run TorchScript (whose ``torch.autograd.grad``
and ``torch.set_grad_enabled`` are native code no Python poison reaches)."""


def _poisoner(report_fd: int) -> Any:
    """``make(name, report=True, kind=RuntimeError)``: a function that, called, reports ``name``
    on ``report_fd`` (when ``report``) and raises."""

    def make(name: str, report: bool = True, kind: type[Exception] = RuntimeError) -> Any:
        if report:
            message = f"{name} is not available in answers: derive the gradient by hand"
        else:
            message = f"{name} is not available in answers"

        def poisoned(*args: Any, **kwargs: Any) -> Any:
            if report:
                with contextlib.suppress(OSError):
                    _write(report_fd, name.encode()[:200] + b"\n")
            raise kind(message)

        poisoned.__name__ = poisoned.__qualname__ = name.rsplit(".", 1)[-1]
        return poisoned

    return make


_REPLACED: dict[int, tuple[Any, Any]] = {}
"""While poisoning: id of each replaced object -> (the object, its replacement), so that other
names for it (``from torch._C._functorch import _grad_increment_nesting``) are replaced too."""


def _put(owner: Any, attr: str, value: Any) -> None:
    old = getattr(owner, attr, None)
    with contextlib.suppress(AttributeError, TypeError):
        setattr(owner, attr, value)
        if callable(old) and not isinstance(old, (types.ModuleType, type(None))):
            _REPLACED.setdefault(id(old), (old, value))


def _replacement(x: Any) -> Any:
    """What replaced ``x`` (see :func:`_put`), or ``x`` itself."""
    found = _REPLACED.get(id(x))
    return found[1] if found is not None and found[0] is x else x


_BOXES = (list, dict, set, tuple, frozenset)
"""Containers a module keeps originals in (``torch.fx`` keeps ``_set_grad_enabled`` in a list)."""


def _replace_aliases() -> None:
    """Every module-level name of a replaced object (an alias) gets the replacement too, and so
    does every container a module keeps at its top level (see :func:`_replaced_in`)."""
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for attr, value in list(namespace.items()):
            with contextlib.suppress(Exception):
                new = _replaced_in(value) if type(value) in _BOXES else _replacement(value)
                if new is not value:
                    namespace[attr] = new
    _REPLACED.clear()


def _replaced_in(box: Any) -> Any:
    """``box`` (a list, dict or set, changed in place; a tuple or frozenset, a new one) with
    the originals it holds directly replaced."""
    if type(box) is list:
        for i, x in enumerate(box):
            box[i] = _replacement(x)
    elif type(box) is dict:
        for k, x in list(box.items()):
            box[k] = _replacement(x)
    elif type(box) is set:
        olds = [x for x in box if _replacement(x) is not x]
        for x in olds:
            box.discard(x)
            box.add(_replacement(x))
    elif any(_replacement(x) is not x for x in box):
        return type(box)(_replacement(x) for x in box)
    return box


def _torch_modules() -> list[Any]:
    """Every module of torch loaded now (functorch too), ``torch._C`` and its submodules."""
    found = [m for n, m in list(sys.modules.items()) if n.split(".")[0] in ("torch", "functorch")]
    C = sys.modules["torch"]._C
    found += [v for v in vars(C).values() if type(v) is type(C)]
    return [m for m in found if m is not None]


UNPICKLING_CLASSES = (
    ("multiprocessing.reduction", "ForkingPickler"),
    ("multiprocessing.connection", "_ForkingPickler"),
)
"""Classes that keep ``pickle.loads`` as an attribute of their own (module-level aliases of the
unpickling functions are found by :func:`_replace_aliases`)."""


def _poison(torch: Any) -> None:
    """Replace every entry point of autograd the runner knows (see the module docstring).

    The gate is grad mode: off in the runner, it can only be switched on through a reporting
    poison (threads, which start with it on, are refused to answers by seccomp), so no graph is
    ever recorded without a report and backward has nothing to run. Forward mode is switched off
    too, and its dual levels poisoned. What computes a gradient without a graph is poisoned as
    well: backward kernels (``torch.*_backward``, ``torch.ops.aten.*_backward``, their Python
    decompositions; not those of ``torch._C._VariableFunctions``, a C type that keeps its
    attributes, which only a private name reaches), functorch's transforms, TorchScript
    (native ``autograd.grad``)."""
    make = _poisoner(ALARM_FD)
    C = torch._C

    def switch(name: str, original: Any) -> Any:  # turning a mode off is no use of autograd
        poisoned = make(name)

        def switched(mode: Any, *args: Any, **kwargs: Any) -> None:
            if mode:
                poisoned()
            original(False)  # off, really: the grad-mode watch switches it off with this
            # (the original stays in this closure: reached, it switches grad mode on no more
            # than torch's C++ guards do, and is caught as they are)

        return switched

    # grad mode and forward mode: off, and on only through a report
    C._set_fwd_grad_enabled(False)
    for attr in ("_set_grad_enabled", "_set_fwd_grad_enabled"):
        _put(C, attr, switch(f"torch._C.{attr}", getattr(C, attr)))
    for attr in ("_enter_dual_level", "_make_dual"):
        _put(C, attr, make(f"torch._C.{attr}"))
    for owner in (torch, C._VariableFunctions):
        _put(owner, "_make_dual", make("torch._make_dual"))
    autograd, Tensor = torch.autograd, torch.Tensor
    for attr in ("make_dual", "enter_dual_level", "dual_level"):
        _put(autograd.forward_ad, attr, make(f"torch.autograd.forward_ad.{attr}"))
    # reverse mode's own entry points
    for attr in ("grad", "backward", "gradcheck", "gradgradcheck"):
        _put(autograd, attr, make(f"torch.autograd.{attr}"))
    for attr in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"):
        _put(autograd.functional, attr, make(f"torch.autograd.functional.{attr}"))
    _put(autograd.Function, "apply", make("torch.autograd.Function.apply"))
    engine = make("the autograd engine")
    _put(autograd.variable.Variable, "_execution_engine", types.SimpleNamespace(
        run_backward=engine, queue_callback=engine, is_checkpoint_valid=engine
    ))  # fmt: skip
    _put(C, "_ImperativeEngine", engine)
    for attr in ("backward", "retain_grad", "register_hook"):
        _put(Tensor, attr, make(f"Tensor.{attr}"))
    set_requires_grad_ = make("Tensor.requires_grad_")

    def requires_grad_(self: Any, requires_grad: bool = True) -> Any:
        return set_requires_grad_() if requires_grad else self

    _put(Tensor, "requires_grad_", requires_grad_)
    base = C.TensorBase.requires_grad
    set_requires_grad = make("Tensor.requires_grad")

    def _get(self: Any) -> Any:
        return base.__get__(self)

    def _set(self: Any, value: Any) -> None:
        if value:
            set_requires_grad()

    _put(Tensor, "requires_grad", property(_get, _set))
    # backward kernels and their decompositions, functorch's transforms, by name in every module
    for module in _torch_modules():
        for attr, value in list(vars(module).items()):
            if "backward" in attr and callable(value) and not isinstance(value, type):
                _put(module, attr, make(f"{module.__name__}.{attr}"))
        name = module.__name__
        if name == "torch.func" or name.startswith(("torch._functorch", "functorch")):
            for attr in FUNCTIONAL_TRANSFORMS:
                if attr in vars(module):
                    _put(module, attr, make(f"torch.func.{attr}"))
    for attr in dir(C._functorch):
        if any(k in attr for k in ("grad", "jvp", "_func_increment", "dual")):
            _put(C._functorch, attr, make(f"torch._C._functorch.{attr}"))
    _poison_operators(torch, make)
    # TorchScript: compiling, loading or running it
    for attr in [a for a in dir(C) if TORCHSCRIPT.match(a)]:
        _put(C, attr, make(f"TorchScript (torch._C.{attr})", report=False))
    for attr in ("__init__", "define", "create_function"):
        _put(C.CompilationUnit, attr, make("TorchScript (CompilationUnit)", report=False))
    for attr in ("script", "trace", "trace_module", "load", "script_if_tracing", "freeze"):
        _put(torch.jit, attr, make(f"TorchScript (torch.jit.{attr})", report=False))
    # unpickling (numpy.load(allow_pickle=True), torch.load): it rebuilds any object from bytes,
    # the built-ins that the name rule refuses among them, so no answer needs it
    unpickling = make("unpickling", report=False)
    for module in (sys.modules.get("pickle"), sys.modules.get("_pickle")):
        for attr in ("load", "loads", "Unpickler", "_load", "_loads", "_Unpickler"):
            if module is not None and hasattr(module, attr):
                _put(module, attr, unpickling)
    for name, owner in UNPICKLING_CLASSES:
        found = getattr(sys.modules.get(name), owner, None)
        if found is not None:
            _put(found, "loads", unpickling)
    _replace_aliases()


def _poison_operators(torch: Any, make: Any) -> None:
    """``torch.ops``: the operators resolved by the runner stay (``torch.ops.aten.log``), those
    of autograd go, and new lookups are refused (``torch.ops`` resolves an operator from its
    name, so a backward kernel would be a string away). Every operator object already made
    (``OpOverload``, in decomposition tables and elsewhere) of an autograd operator loses its
    kernels; the Python decompositions of backward operators are poisoned."""
    from torch._ops import OpOverload, OpOverloadPacket

    C = torch._C
    report = make("torch.ops (an autograd operator)")
    refused = make("torch.ops lookups", report=False)
    for space in list(vars(torch.ops).values()):
        if hasattr(space, "_dir") and not isinstance(space, OpOverloadPacket):
            for attr in [a for a, v in vars(space).items() if isinstance(v, OpOverloadPacket)]:
                if AUTOGRAD_OP.search(attr):
                    with contextlib.suppress(AttributeError):
                        delattr(space, attr)

    def _getattr(self: Any, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return report() if AUTOGRAD_OP.search(name) else refused()

    _put(type(torch.ops.aten), "__getattr__", _getattr)

    def lookup(name: str = "", *args: Any, **kwargs: Any) -> Any:
        return report() if AUTOGRAD_OP.search(str(name)) else refused()

    for attr in ("_get_operation_overload", "_jit_get_operation", "_jit_resolve_packet"):
        _put(C, attr, lookup)
    _put(C, "_dispatch_find_schema_or_throw", lookup)
    decompositions = sys.modules.get("torch._decomp")  # first: keys hash by their kernel
    for entries in getattr(decompositions, "global_decomposition_table", {}).values():
        for key in [k for k in entries if AUTOGRAD_OP.search(str(k))]:
            entries[key] = report
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            if not isinstance(obj, (OpOverload, OpOverloadPacket)):
                continue
            name = getattr(obj, "_name", None) or getattr(obj, "_qualified_op_name", "")
            if AUTOGRAD_OP.search(str(name).partition("::")[2]):
                for attr in ("_op", "_op_dk"):
                    _put(obj, attr, report)
                namespace = vars(obj)
                namespace.pop("_handle", None)
                if isinstance(namespace.get("py_kernels"), dict):
                    namespace["py_kernels"] = {}


def _close_escape_hatches(make: Any) -> None:
    """Take ``ctypes`` out of plain reach (with it, memory could be written directly), refuse to
    load any extension module or to make a builtin one again (a second copy of ``_ctypes``, of
    torch's ``_C`` or of ``_imp`` would come unpoisoned), and refuse the collector's walks over
    every object (which would find the originals of what was poisoned). Not reported: none of
    it is autograd. Every builtin module is loaded first, so an import never needs one."""
    warnings.simplefilter("ignore")  # reading every module's names wakes deprecation proxies
    for name in sys.builtin_module_names:
        with contextlib.suppress(ImportError):
            __import__(name)
    doomed = [m for m in list(sys.modules) if m == "_ctypes" or m.split(".")[0] == "ctypes"]
    objects = [sys.modules[m] for m in doomed]
    for name, module in list(sys.modules.items()):
        if module is None or name in doomed:
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for attr, value in list(namespace.items()):
            owner = getattr(value, "__module__", None)
            bases = getattr(value, "__mro__", None) if isinstance(value, type) else None
            if (
                any(value is o for o in objects)
                or (isinstance(owner, str) and owner.split(".")[0] in ("ctypes", "_ctypes"))
                or any(getattr(b, "__module__", "") in ("ctypes", "_ctypes") for b in bases or ())
            ):
                with contextlib.suppress(AttributeError, TypeError, KeyError):
                    del namespace[attr]
    for name in doomed:
        sys.modules[name] = None  # type: ignore[assignment]  # "import ctypes" now fails
    for module in objects:  # ctypes's Python half: what its classes' methods would call
        if module.__name__ != "_ctypes":  # (found through object.__subclasses__(): CDLL...)
            vars(module).clear()
    imp = sys.modules.get("_imp")
    if imp is not None:
        for attr in ("create_dynamic", "create_builtin", "exec_dynamic", "exec_builtin"):
            what = f"importing a module that is not loaded yet ({attr})"
            _put(imp, attr, make(what, report=False, kind=ImportError))
    for attr in ("get_objects", "get_referrers", "get_referents"):
        _put(gc, attr, make(f"gc.{attr}", report=False))
    del objects
    _REPLACED.clear()  # no table of the originals stays behind
    warnings.resetwarnings()


# ---------------------------------------------------------------------------------------------
# one answer


def _describe(e: BaseException) -> str:
    try:
        text = str(e)
    except BaseException:  # a hostile __str__
        text = ""
    name = type(e).__name__
    return f"{name}: {text[:300]}" if text else name


def _lineno(e: BaseException) -> int | None:
    if isinstance(e, SyntaxError) and e.filename == ANSWER_FILE:
        return e.lineno
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == ANSWER_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class Answering:
    """Everything a process needs to run answers and encode them, bound before any answer runs
    (so monkeypatching torch or builtins afterwards cannot change how answers are read)."""

    def __init__(self, torch: Any, is_grad_enabled: Any) -> None:
        F = sys.modules["torch.nn.functional"]
        self.modules = {"torch": torch, "F": F}
        self.Tensor = torch.Tensor
        self.equal, self.clone = torch.equal, torch.Tensor.clone
        self.detach, self.contiguous = torch.Tensor.detach, torch.Tensor.contiguous
        self.numel, self.reshape = torch.Tensor.numel, torch.Tensor.reshape
        self.view, self.numpy = torch.Tensor.view, torch.Tensor.numpy
        self.uint8 = torch.uint8
        self.is_grad_enabled = is_grad_enabled
        self.requires_grad = torch._C.TensorBase.requires_grad.__get__
        self.grad_fn = torch._C.TensorBase.grad_fn.__get__
        self.dumps, self.isfinite, self.pack = json.dumps, math.isfinite, struct.pack
        self.builtins = builtins
        self.watching: Any = lambda: True  # see _watch_grad_mode
        # autograd's own count of the graph nodes this thread has recorded: no answer can set
        # it back, and nothing is recorded with grad mode off, whatever switched it on
        self.recorded = torch._C._autograd._get_sequence_nr
        self.raised = False  # whether a case of the last run raised (see RERUN)

    def raw(self, t: Any) -> bytes:
        """The bytes of a contiguous tensor, any dtype."""
        return bytes(self.numpy(self.view(self.reshape(t, (-1,)), self.uint8)).tobytes())

    def run(self, name: str, upstream: list[str], code: str, cases: list[dict[str, Any]]) -> bytes:
        """Execute ``code`` once per case in a fresh namespace and encode what it produced."""
        records: list[dict[str, Any]] = []
        blobs: list[bytes] = []
        syntax: dict[str, Any] | None = None
        self.raised = False
        try:
            compiled = compile(code, ANSWER_FILE, "exec", dont_inherit=True)  # as a notebook would
        except SyntaxError as e:
            compiled = None
            syntax = {"kind": "error", "error": _describe(e), "lineno": _lineno(e)}
        for case in cases:
            if compiled is None:
                records.append({**(syntax or {}), "case": case["name"]})
                continue
            pristine = dict(case["graph"])
            for up in upstream:
                pristine[up] = case["upstream"][up]
            given = {
                k: self.clone(v) if isinstance(v, self.Tensor) else v for k, v in pristine.items()
            }
            ns: dict[str, Any] = {"__builtins__": self.builtins, **self.modules, **given}
            nodes = self.recorded()
            rec = self._execute(compiled, ns, name, blobs)
            graph = self.recorded() != nodes  # a graph was recorded: autograd, by any route
            if graph:
                with contextlib.suppress(OSError):
                    _write(ALARM_FD, b"autograd recording a graph\n")
            rec["case"] = case["name"]
            rec["mutated"] = [
                k
                for k, v in given.items()
                if isinstance(v, self.Tensor) and not self.equal(v, pristine[k])
            ]
            watched = self.watching()
            if not watched:  # taken away: by a recursion past the limit, say
                with contextlib.suppress(OSError):
                    _write(ALARM_FD, b"the grad-mode watch, switched off\n")
            rec["autograd"] = bool(
                self.is_grad_enabled() or rec.pop("autograd_result", False) or not watched or graph
            )
            records.append(rec)
        header = self.dumps({"cases": records}, allow_nan=False).encode()
        return self.pack("<Q", len(header)) + header + b"".join(blobs)

    def _execute(self, compiled: Any, ns: dict[str, Any], name: str, blobs: list[bytes]) -> dict:
        rec: dict[str, Any] = {}
        try:
            exec(compiled, ns)
            value = ns.get(name, ns)  # ns itself stands for "never assigned"
            if value is ns:
                rec["kind"] = "missing"
            elif type(value) is self.Tensor:
                t = self.contiguous(self.clone(self.detach(value)))
                if self.numel(t) > MAX_ELEMENTS:
                    rec.update(kind="too-large", shape=[int(s) for s in t.shape])
                else:
                    rec.update(
                        kind="tensor",
                        dtype=str(t.dtype).removeprefix("torch."),
                        shape=[int(s) for s in t.shape],
                    )
                    rec["autograd_result"] = bool(
                        self.requires_grad(value) or self.grad_fn(value) is not None
                    )
                    blobs.append(self.raw(t))
                    rec["nbytes"] = len(blobs[-1])
            elif type(value) in (int, float, bool) and self.isfinite(float(value)):
                rec.update(kind="number", number=float(value))
            else:
                rec.update(kind="other", type_name=type(value).__name__[:80])
        except NotImplementedError as e:
            rec.update(kind="not-implemented", error=_describe(e), lineno=_lineno(e))
        except BaseException as e:  # SystemExit and KeyboardInterrupt are the answer's too
            rec.update(kind="error", error=_describe(e), lineno=_lineno(e))
            self.raised = True
        return rec


# ---------------------------------------------------------------------------------------------
# the process that runs answers


class _Native:
    """The few system calls the runner makes through ``ctypes``, bound before ``ctypes`` is
    taken out of the answers' reach (see :func:`_close_escape_hatches`)."""

    CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x20000, 0x10000000, 0x20000000
    MS_NOSUID, MS_NODEV = 2, 4
    PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER = 1, 4, 24, 36
    _MADV_COLLAPSE, _CAP_VERSION_3 = 25, 0x20080522

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.prctl, self.unshare, self.capset = libc.prctl, libc.unshare, libc.capset
        self.mount = libc.mount
        self.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self.madvise = libc.madvise
        self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self._caps = (ctypes.c_uint32 * 2)(self._CAP_VERSION_3, 0), (ctypes.c_uint32 * 6)()

    def drop_capabilities(self) -> None:
        """Every capability, bounding set included (a new user namespace gives them all)."""
        for cap in range(64):
            if self.prctl(self.PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                break
        header, data = self._caps
        if self.capset(header, data) != 0:
            raise OSError("cannot drop the capabilities of a new user namespace")

    def private_scratch(self, folder: str, size: int) -> bool:
        """Mount a fresh tmpfs over ``folder`` (in a mount namespace of our own)."""
        options = f"size={int(size)},mode=0700,nr_inodes=4096".encode()
        flags = self.MS_NOSUID | self.MS_NODEV
        return self.mount(b"tmpfs", folder.encode(), b"tmpfs", flags, options) == 0

    def collapse(self, start: int, length: int) -> None:
        self.madvise(start, length, self._MADV_COLLAPSE)


NATIVE: _Native | None = None
"""Bound by :func:`main` (ctypes is loaded by torch anyway)."""

INSTALL_STEP_FILTER: Any = None
"""Installs :data:`seccomp.STEP` in the calling process (None without seccomp)."""

ANSWERING: Any = None
"""The :class:`Answering` every process that runs answers uses (made by the runner)."""

RERUN = (1 << 64) - 1
"""In place of step ``i``'s result length, in a shared process: step ``i`` and the rest are to
be run each in a process of its own. A shared process carries what its earlier steps left (the
memory a cycle still holds, a grad-mode watch taken away), and an outcome is shared with every
identical answer in the class, so only what cannot be an earlier step's doing is judged there:
the first step, or a step that raised nothing and left the watch in place. Otherwise (a step
that raised, or after which the watch is gone, or one that crashed or ran out of time, see
:func:`_run_group`) that step and the rest run again alone; a step that took the watch away
keeps its own verdict (its cases count as autograd use), and the steps after it run alone."""


def _answer_process(
    steps: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    limits: dict[str, Any],
    result_w: int,
    alarm_w: int,
    output_w: int,
) -> None:
    """Never returns: confine this process, run its steps, write one frame per step on fd 3.

    Only fds 0 (``/dev/null``), 1 and 2 (the output pipe), 3 (results) and 4 (the alarm pipe of
    :data:`ALARM_FD`) stay open."""
    code = 0
    try:
        result, alarm = os.dup(result_w), os.dup(alarm_w)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(output_w, 1)
        os.dup2(output_w, 2)
        os.dup2(result, 3)
        os.dup2(alarm, ALARM_FD)
        for fd in _open_fds():
            if fd > ALARM_FD:
                with contextlib.suppress(OSError):
                    os.close(fd)
        sys.stdin = io.StringIO()
        sys.stdout = open(1, "w", 1, "utf-8", "backslashreplace", closefd=False)
        sys.stderr = open(2, "w", 1, "utf-8", "backslashreplace", closefd=False)
        if NATIVE is not None:  # first to go when the sandbox's memory runs out (our own
            NATIVE.prctl(NATIVE.PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self is ours while at it)
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
        if NATIVE is not None:
            NATIVE.prctl(NATIVE.PR_SET_DUMPABLE, 0, 0, 0, 0)
        with open("/proc/self/statm") as f:  # first field: VmSize, in pages
            vm_size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cpu = int(limits["cpu_seconds"]) * max(1, len(steps))
        setrlimit = resource.setrlimit
        setrlimit(resource.RLIMIT_AS, (vm_size + int(limits["memory_bytes"]),) * 2)
        setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]),) * 2)
        setrlimit(resource.RLIMIT_CORE, (0, 0))
        setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        if INSTALL_STEP_FILTER is not None:
            INSTALL_STEP_FILTER()
        _forget_the_runner(cases)
        ANSWERING.watching = _watch_grad_mode(ANSWERING.is_grad_enabled, ALARM_FD)
        write_all, pack = wire.write_all, struct.pack
        for index, step in enumerate(steps):
            data = ANSWERING.run(step["name"], step["upstream"], step["code"], cases)
            if index > 0 and (ANSWERING.raised or not ANSWERING.watching()):
                write_all(3, pack("<QQ", index, RERUN))  # maybe not its own doing: see RERUN
                break
            write_all(3, pack("<QQ", index, len(data)) + data)
            if index + 1 < len(steps) and not ANSWERING.watching():
                write_all(3, pack("<QQ", index + 1, RERUN))  # the rest: not without a watch
                break
    except BaseException:  # run() catches the answer's own exceptions: this is a crash
        code = 70
    finally:
        _exit(code)


WATCHED = frozenset(
    {"run_backward", "queue_callback", "_make_dual", "_unpack_dual", "_enter_dual_level"}
)
"""Native functions of autograd's engine and forward mode: called from Python, whatever the
route to them (``_EngineBase`` found among Python's classes, say), they are reported."""


def _watch_grad_mode(is_grad_enabled: Any, alarm_fd: int) -> Any:
    """Install, in a process about to run answers, a profile hook that catches grad mode switched
    on by another route (the poisoned names are the front door; an original ``_set_grad_enabled``
    kept somewhere, or a guard of torch's, would be a back one): at every call and return that
    Python reports (Python functions, and builtins called from Python) it looks at grad mode, and
    reports and switches it off when it is on, so a graph recorded from Python is caught. The
    hook cannot be taken away (``sys.setprofile`` reports, then refuses); returns a function
    that tells whether it is still installed (a hook that raised, at the recursion limit say,
    is dropped by Python: then the answer's case counts as tampering)."""
    set_grad = sys.modules["torch"]._C._set_grad_enabled  # the poisoned one: it reports
    getprofile, write = sys.getprofile, _write
    reported = [False]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__name__", None) in WATCHED:
            with contextlib.suppress(OSError):
                write(alarm_fd, f"torch's {arg.__name__}".encode() + b"\n")
        if is_grad_enabled():  # at every call and return, Python's or native
            if not reported[0]:
                reported[0] = True
                with contextlib.suppress(OSError):
                    write(alarm_fd, b"torch.set_grad_enabled(True)\n")
            with contextlib.suppress(BaseException):
                set_grad(False)

    sys.setprofile(hook)
    make = _poisoner(alarm_fd)
    _put(sys, "setprofile", make("sys.setprofile", report=True))
    threading = sys.modules.get("threading")
    if threading is not None:
        _put(threading, "setprofile", make("threading.setprofile", report=True))
    _REPLACED.clear()  # the original sys.setprofile is nowhere an answer can reach
    return lambda: getprofile() is hook


def _forget_the_runner(own: list[dict[str, Any]]) -> None:
    """In a process about to run answers: drop what the runner and supervisor hold that the
    answers need not reach through ``sys.modules["__main__"]``: every bank (other steps'
    inputs), the native calls (their ``ctypes`` objects), the filter installer. The banks'
    tensors these answers are not given (``own`` holds those they are) are zeroed first: a
    tensor dropped leaves its bytes in freed memory, where an answer reading its own heap would
    find other steps' upstream gradients (in the true-upstream cases, their references). Each
    tensor is over the only copy of its bytes (see :func:`wire.receive`)."""
    global NATIVE, INSTALL_STEP_FILTER, NESTED
    given = {id(t) for case in own for part in ("graph", "upstream") for t in case[part].values()}
    for bank in BANKS.values():
        for case in bank:
            for part in ("graph", "upstream"):
                for t in case[part].values():
                    if id(t) not in given and hasattr(t, "zero_"):
                        t.zero_()
    BANKS.clear()
    NATIVE = INSTALL_STEP_FILTER = NESTED = None


def _own_cases(steps: list[dict[str, Any]], cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``cases`` with only the upstream gradients ``steps`` are given (the graph is every
    step's)."""
    given = {u for step in steps for u in step["upstream"]}
    return [
        {
            "name": case["name"],
            "graph": case["graph"],
            "upstream": {k: v for k, v in case["upstream"].items() if k in given},
        }
        for case in cases
    ]


class _Become(BaseException):
    """Raised in a new process that is to run answers, right after the fork: it unwinds the
    supervisor's frames (which hold every step's inputs and the submission's whole request) up
    to :func:`main`, which then runs :func:`_answer_process` with only what it carries. An
    answer that walks its frames finds its own steps and their inputs, nothing else."""

    def __init__(self, job: tuple[Any, ...]) -> None:
        super().__init__("a process that runs answers")
        self.job = job


def _open_fds() -> list[int]:
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


# ---------------------------------------------------------------------------------------------
# the supervisor: one submission


class _Group:
    """One process running some answers, watched by the supervisor."""

    def __init__(self, pid: int, result: int, alarm: int, output: int, steps: list[dict]) -> None:
        self.pid, self.result, self.alarm, self.output = pid, result, alarm, output
        self.steps = steps
        self.index = 0
        self.buffer = bytearray()
        self.out = bytearray()
        self.alarms = bytearray()
        self.flooded = False  # more came on the alarm pipe than MAX_ALARM_BYTES
        self.started = time.monotonic()


def _spawn(steps: list[dict], cases: list[dict], limits: dict[str, Any]) -> _Group:
    """Start the process that runs ``steps``, in a session of its own (so no process group
    reaches back to the supervisor), in the submission's namespaces where it has some (see
    :class:`_Nest`)."""
    result_r, result_w = os.pipe()
    alarm_r, alarm_w = os.pipe()
    output_r, output_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (result_r, alarm_r, output_r):
                os.close(fd)
            os.setsid()
            job = (steps, _own_cases(steps, cases), limits, result_w, alarm_w, output_w)
        except BaseException:
            _exit(70)
        raise _Become(job)
    for fd in (result_w, alarm_w, output_w):
        os.close(fd)
    for fd in (result_r, alarm_r, output_r):
        os.set_blocking(fd, False)
    return _Group(pid, result_r, alarm_r, output_r, steps)


class _Nest:
    """The namespaces a submission's answers run in: a user namespace (they are ``nobody`` in
    it, as the sandbox's user, without capabilities), a PID namespace (they see no process of
    the sandbox, not even their supervisor or the runner, so they can signal none) and a mount
    namespace with a scratch tmpfs of the submission's own.

    The supervisor enters them itself (``unshare``: its own PID stays, its children's are in
    the new namespace) and forks the namespace's first process, the *keeper*, which only waits:
    while it lives, the answers' processes can be forked into the namespace; it ignores what
    they send it (a namespace's init does), clears the namespace on request (``kill(-1)``, then
    reaps), and dies with the supervisor, and the namespace with it."""

    def __init__(self, keeper: int, request: int, reply: int) -> None:
        self.keeper, self.request, self.reply = keeper, request, reply

    @staticmethod
    def _map_ids(uid: int, gid: int) -> None:
        assert NATIVE is not None
        NATIVE.prctl(NATIVE.PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self is ours to write
        try:
            for name, text in (
                ("uid_map", f"65534 {uid} 1\n"),
                ("setgroups", "deny"),
                ("gid_map", f"65534 {gid} 1\n"),
            ):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        finally:
            NATIVE.prctl(NATIVE.PR_SET_DUMPABLE, 0, 0, 0, 0)

    @classmethod
    def enter(cls, scratch: str, size: int) -> _Nest | None:
        """Enter the namespaces (None where the kernel refuses), mount the scratch, give up
        every capability, fork the keeper."""
        assert NATIVE is not None
        uid, gid = os.geteuid(), os.getegid()
        flags = _Native.CLONE_NEWUSER | _Native.CLONE_NEWPID | _Native.CLONE_NEWNS
        if NATIVE.unshare(flags) != 0:
            return None
        try:  # unmapped, we could not own files on a tmpfs of our own: keep the sandbox's
            cls._map_ids(uid, gid)
            if NATIVE.private_scratch(scratch, size):
                os.chdir(scratch)
        except OSError:
            pass
        NATIVE.drop_capabilities()
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        keeper = os.fork()
        if keeper == 0:
            _keep(request_r, reply_w)
        os.close(request_r)
        os.close(reply_w)
        return cls(keeper, request_w, reply_r)

    def clear(self) -> None:
        """Have the keeper kill every other process of the namespace and reap them."""
        os.write(self.request, b"k")
        if os.read(self.reply, 1) != b"d":
            raise RuntimeError("the namespace's keeper is gone")


def _keep(request: int, reply: int) -> None:
    """The keeper's life (see :class:`_Nest`). Never returns."""
    try:
        assert NATIVE is not None
        NATIVE.prctl(NATIVE.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for fd in _open_fds():
            if fd not in (request, reply):
                with contextlib.suppress(OSError):
                    os.close(fd)
        while os.read(request, 1):
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                while True:
                    os.waitpid(-1, 0)
            os.write(reply, b"d")
    finally:
        _exit(0)


NESTED: _Nest | None = None
"""The supervisor's namespaces (see :class:`_Nest`), once entered."""

TAINTED = False
"""Set in a supervisor once a step left something in the scratch that could not be removed:
the later steps' outcomes may depend on it, so none is the answer's own any more."""


def _kill_everything_else(isolated: bool, group: _Group) -> bool:
    """Kill the answers' process, and every other process an answer could have left: in the
    submission's namespace (:class:`_Nest`) through its keeper; else, where the sandbox has a
    PID namespace of its own, every process in it but the runner and this supervisor
    (``kill(-1)`` spares init and the caller). Reap every child, then empty the scratch, so
    that nothing goes from one step to the next. False if the scratch keeps something."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(group.pid, signal.SIGKILL)
    if NESTED is not None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(group.pid, 0)
        NESTED.clear()
    else:
        if isolated:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
    try:
        return _empty(os.getcwd())
    except OSError:
        return False


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            name = signal.Signals(sig).name
            hint = {"SIGXCPU": ", CPU time limit exceeded", "SIGSEGV": ""}.get(name, "")
            return f"killed by signal {sig} ({name}){hint}"
        return f"killed by signal {sig}"
    return f"exited with code {os.WEXITSTATUS(status)}"


def supervise(control: int, isolated: bool) -> None:
    """Never returns. Read this submission's steps from the stream, run them, send each outcome
    as soon as it is known, then ``{"op": "done"}``."""
    code = 0
    try:
        global NESTED
        assert NATIVE is not None
        NATIVE.prctl(NATIVE.PR_SET_DUMPABLE, 0, 0, 0, 0)  # answers cannot read our memory
        NATIVE.prctl(NATIVE.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        header, _ = wire.receive(control, MAX_REQUEST)
        cases = BANKS[header["bank"]]
        limits: dict[str, Any] = header["limits"]
        if NEST:
            scratch = os.environ.get("TMPDIR", "/tmp")
            NESTED = _Nest.enter(scratch, int(limits["file_bytes"]))
        budget_end = time.monotonic() + float(limits["budget_seconds"])
        steps: list[dict[str, Any]] = header["steps"]
        plain = [s for s in steps if s.get("plain")]
        pending = [plain] if plain else []
        pending += [[s] for s in steps if not s.get("plain")]
        while pending:
            group_steps = pending.pop(0)
            left = _run_group(control, group_steps, cases, limits, budget_end, isolated)
            pending = [[s] for s in left] + pending  # unfinished shared steps: one process each
        wire.send(control, {"op": "done"})
    except _Become:
        code = -1  # not the supervisor any more: on to main(), see _Become
        raise
    except BaseException as e:
        with contextlib.suppress(BaseException):
            sys.stderr.write(f"supervisor: {_describe(e)}\n")
        code = 71
    finally:
        if code >= 0:
            _exit(code)


def _outcome(
    control: int,
    step: dict,
    status: str,
    detail: str,
    seconds: float,
    group: _Group | None,
    payload: bytes = b"",
    own: bool = True,
) -> None:
    """Send one step's outcome. ``own`` is False when it says more about the rest of the
    submission than about the step's code (a time budget spent by other steps): the grader then
    does not give it to another submission's identical answer."""
    output = group.out.decode(errors="replace") if group else ""
    alarms = group.alarms.decode(errors="replace").splitlines() if group else []
    if group and group.flooded:
        alarms.append("the alarm pipe, flooded")
    header = {
        "op": "outcome",
        "key": step["key"],
        "status": status,
        "detail": detail,
        "seconds": round(seconds, 6),
        "output": output[:4000],
        "autograd": sorted(set(a for a in alarms if a))[:20],
        "own": own and not TAINTED,
    }
    wire.send(control, header, [payload] if payload else [])
    if group is not None:
        group.out.clear()
        group.alarms.clear()
        group.flooded = False


def _run_group(
    control: int,
    steps: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    limits: dict[str, Any],
    budget_end: float,
    isolated: bool,
) -> list[dict[str, Any]]:
    """Run ``steps`` in one process; send each one's outcome. Returns the steps left without one
    (to run alone, see :data:`RERUN`): after the process failed, or from a step on that may
    have failed by an earlier step's doing; [] when every step has an outcome."""
    global TAINTED
    step_seconds = float(limits["step_seconds"])
    if time.monotonic() >= budget_end:
        for step in steps:
            why = "not run: the time budget was spent"
            _outcome(control, step, "timeout", why, 0.0, None, own=False)
        return []
    group = _spawn(steps, cases, limits)
    cap, result_cap = int(limits["output_bytes"]), int(limits["result_bytes"])
    leftover: list[dict[str, Any]] = []
    status = None
    try:
        while group.index < len(steps):
            step = steps[group.index]
            deadline = min(group.started + step_seconds, budget_end)
            left = deadline - time.monotonic()
            if left <= 0:
                if group.index > 0:  # maybe an earlier step's doing: alone (see RERUN)
                    return steps[group.index :]
                why, own = _time_out(step_seconds, budget_end, group)
                seconds = time.monotonic() - group.started
                _outcome(control, step, "timeout", why, seconds, group, own=own)
                group.index += 1
                leftover = steps[group.index :]
                break
            ready, _, _ = select.select([group.result, group.alarm, group.output], [], [], left)
            for fd in ready:
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    continue
                if fd == group.output:
                    if chunk and len(group.out) < cap:
                        group.out += chunk[: cap - len(group.out)]
                elif fd == group.alarm:
                    _alarm(group, chunk)
                elif chunk:
                    group.buffer += chunk
                else:  # the process ended (or closed its result pipe) before all its steps
                    if group.index > 0:  # maybe an earlier step's doing: alone (see RERUN)
                        return steps[group.index :]
                    status = _wait_briefly(group.pid, deadline)
                    seconds = time.monotonic() - group.started
                    if status is None:  # it closed its result and went on, into its limit
                        why, own = _time_out(step_seconds, budget_end, group)
                        _outcome(control, step, "timeout", why, seconds, group, own=own)
                    else:
                        why = f"{_status_text(status)} before returning a result"
                        kind = "crashed" if group.buffer or status else "no-result"
                        _outcome(control, step, kind, why, seconds, group)
                    group.index += 1
                    leftover = steps[group.index :]
                    return leftover
            while len(group.buffer) >= 16:
                index, n = struct.unpack_from("<QQ", group.buffer)
                if n == RERUN and index == group.index > 0:  # only ever after a result
                    return steps[group.index :]  # each in a process of its own
                if index != group.index or n > result_cap:
                    _outcome(
                        control, step, "too-large" if n > result_cap else "crashed",
                        f"result over {result_cap} bytes" if n > result_cap else "garbled result",
                        time.monotonic() - group.started, group,
                    )  # fmt: skip
                    group.index += 1
                    leftover = steps[group.index :]
                    return leftover
                if len(group.buffer) < 16 + n:
                    break
                payload = bytes(group.buffer[16 : 16 + n])
                del group.buffer[: 16 + n]
                _drain(group, cap)
                now = time.monotonic()
                _outcome(control, step, "ok", "", now - group.started, group, payload)
                group.index += 1
                group.started = now
                if group.index < len(steps):
                    step = steps[group.index]
        return leftover
    finally:
        for fd in (group.result, group.alarm, group.output):
            os.close(fd)
        if not _kill_everything_else(isolated, group):
            TAINTED = True


def _time_out(step_seconds: float, budget_end: float, group: _Group) -> tuple[str, bool]:
    """Why a step ran out of time, and whether that is its own doing (not the budget's)."""
    if budget_end <= group.started + step_seconds:
        return "stopped: the submission's time budget was spent", False
    return f"killed after {step_seconds:g} s (time limit)", True


MAX_ALARM_BYTES = 1 << 16
"""The most of the alarm pipe the supervisor keeps for one group (a report is a name of up to
200 bytes): an answer that floods the pipe is reported all the same, since anything on it is,
and costs the supervisor no more memory than this."""


def _alarm(group: _Group, chunk: bytes) -> None:
    """Keep ``chunk`` of the alarm pipe, up to :data:`MAX_ALARM_BYTES` in all; past that, the
    group is marked flooded (blank lines to push a report out count as a report)."""
    room = MAX_ALARM_BYTES - len(group.alarms)
    group.alarms += chunk[: max(room, 0)]
    if len(chunk) > room:
        group.flooded = True


def _drain(group: _Group, cap: int) -> None:
    """Read what the alarm and output pipes hold now (written before the result was)."""
    with contextlib.suppress(BlockingIOError, OSError):
        _alarm(group, os.read(group.alarm, 4096))
    for _ in range(64):
        try:
            chunk = os.read(group.output, 1 << 20)
        except (BlockingIOError, OSError):
            return
        if not chunk:
            return
        if len(group.out) < cap:
            group.out += chunk[: cap - len(group.out)]


def _wait_briefly(pid: int, deadline: float) -> int | None:
    """The exit status of ``pid`` once it ends, or None if it still runs at the deadline (it
    closed its result pipe and went on)."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.001)


# ---------------------------------------------------------------------------------------------
# the runner


def _collapse_memory() -> None:
    """Back anonymous memory with huge pages (MADV_COLLAPSE, Linux 6.1+): a fork copies one
    page-table entry per page, and torch's heap is ~35,000 small pages but ~70 huge ones, so
    forks and exits get about twice as cheap. Only mappings at least half populated, so memory
    grows little; harmless where unsupported."""
    huge, regions, current = 2**21, [], None
    with contextlib.suppress(OSError), open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0]:
                current = None
                if fields[1].startswith("rw") and fields[1].endswith("p"):
                    if len(fields) < 6 or fields[5] == "[heap]":
                        start, end = (int(x, 16) for x in fields[0].split("-"))
                        current = [-(-start // huge) * huge, end // huge * huge, 0]
                        regions.append(current)
            elif fields[0] == "Rss:" and current is not None:
                current[2] = int(fields[1]) * 1024
    for start, end, rss in regions:
        if end > start and rss >= (end - start) // 2 and NATIVE is not None:
            NATIVE.collapse(start, end - start)


def _empty(folder: str, budget: int = 200_000) -> bool:
    """Remove everything inside ``folder``, whatever its modes, without following a symlink,
    recursing or holding more than two fds (a tree a submission made may be deep): descend into
    a folder that cannot be removed yet, go back up through ``..`` once it is empty. True if
    ``folder`` is empty afterwards."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd, depth = os.open(folder, flags), 0
    try:
        while budget > 0:
            into = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    budget -= 1
                    if not entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            os.unlink(entry.name, dir_fd=fd)
                        continue
                    with contextlib.suppress(OSError):
                        os.chmod(entry.name, 0o700, dir_fd=fd)  # a real folder: no symlink
                    try:
                        os.rmdir(entry.name, dir_fd=fd)
                    except OSError:
                        into = entry.name
                        break
            if into is None and depth == 0:
                break
            step = into if into is not None else ".."
            new = os.open(step, flags, dir_fd=fd)
            os.close(fd)
            fd, depth = new, depth + (1 if into is not None else -1)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        return not os.listdir(folder)
    except OSError:
        return False


def _reap_and_clean(isolated: bool) -> bool:
    """After a submission: kill what is left (in a PID namespace of our own), reap, and empty
    the scratch folder, so the next submission finds the sandbox as new. False if the scratch
    could not be emptied (the grader then replaces this sandbox)."""
    if isolated:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
    while True:
        try:
            if os.waitpid(-1, 0)[0] <= 0:
                break
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    scratch = os.environ.get("TMPDIR", "/tmp")
    with contextlib.suppress(OSError):
        os.chmod(scratch, 0o700)
    try:
        return _empty(scratch)
    except Exception:
        return False


PRELOADED = (
    *("numpy", "numpy.random", "numpy.linalg", "numpy.fft", "math", "cmath", "random"),
    *("itertools", "functools", "collections", "statistics", "fractions", "decimal", "bisect"),
    *("heapq", "datetime", "json", "string", "re", "copy", "operator", "typing", "dataclasses"),
    *("enum", "warnings", "linecache", "tracemalloc", "traceback", "textwrap", "pprint"),
    *("array", "time", "struct", "unicodedata", "zlib", "hashlib", "binascii", "pickle"),
)
"""Modules an answer may import at no cost: loaded by the runner (an answer cannot load a new
extension module, see :func:`_close_escape_hatches`)."""


def main() -> None:
    """Import torch, report ready, then serve the grader's requests until the stream ends."""
    global NATIVE, SECCOMP, INSTALL_STEP_FILTER, ANSWERING
    control = CONTROL
    os.set_inheritable(control, False)
    null = os.open(os.devnull, os.O_WRONLY)
    if null != ALARM_FD:
        os.dup2(null, ALARM_FD)
        os.close(null)
    isolated = _getpid() == 1
    NATIVE = _Native()
    if not isolated:  # no PID namespace: die with the launcher at least
        NATIVE.prctl(NATIVE.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    NATIVE.prctl(NATIVE.PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing in the sandbox may read us
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch
    import torch.nn.functional

    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            __import__(name)
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    aten = torch.ops.aten
    for schema in torch._C._jit_get_all_schemas():  # resolve every op now (see _poison)
        space, _, name = schema.name.partition("::")
        if space == "aten" and not AUTOGRAD_OP.search(name):
            with contextlib.suppress(Exception):
                getattr(aten, name)
    SECCOMP = os.environ.get("BACKPROP_NINJA_SECCOMP", "1") == "1" and seccomp.supported()
    if SECCOMP:
        seccomp.install(seccomp.SANDBOX)
        INSTALL_STEP_FILTER = seccomp.prepare(seccomp.STEP, no_clone=True)
    ANSWERING = Answering(torch, torch._C.is_grad_enabled)
    _poison(torch)
    _close_escape_hatches(_poisoner(ALARM_FD))
    gc.collect()
    gc.freeze()
    _collapse_memory()
    wire.send(
        control,
        {"op": "ready", "isolated": isolated, "seccomp": SECCOMP, "torch": torch.__version__},
    )
    while True:
        try:
            header, blobs = wire.receive(control, MAX_REQUEST)
        except EOFError:
            _exit(0)
        op = header.get("op")
        if op == "bank":
            load_bank(torch, header, blobs)
            wire.send(control, {"op": "banked", "id": header["id"]})
        elif op == "submission":
            pid = os.fork()
            if pid == 0:
                header = blobs = {}  # nothing of the request (see _Become)
                try:
                    supervise(control, isolated)
                except _Become as become:
                    job = become.job
                _answer_process(*job)  # the supervisor's frames are gone (see _Become)
            _, status = os.waitpid(pid, 0)
            clean = _reap_and_clean(isolated)
            wire.send(control, {"op": "idle", "status": _status_text(status), "clean": clean})
        else:
            _exit(2)


if __name__ == "__main__":
    main()

"""The sandbox's promises, seen from inside it, through the real Pool and Grader.

Each variant (the grader as root or as ``nobody``; the sandbox confined by the kit's own user
namespaces or by bubblewrap) starts one Grader and runs probes as answers: one gathers what a
submission can see and do (:data:`FACTS`), one collects every floating tensor it can reach and
sends it back (:data:`REACH`), a battery of autograd attempts and of ordinary answers is graded,
a submission leaves traps in its scratch for the next one, and a budget of three seconds meets
answers that loop. The unprivileged variant runs :func:`explore` in a child that dropped to uid
65534 itself (see :mod:`tests.unprivileged`) and sends the same report back as JSON; the tests
assert the same facts of both.

Nothing is mocked, and nothing depends on the machine's speed: time limits are generous and every
wait ends on an event (an outcome, a process's exit).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

from autograder.engine.grader import Grader
from autograder.exercises import DEFAULT as EX
from autograder.grading.answers import parse_payload
from autograder.grading.compare import RTOL
from autograder.sandbox import memory, plan, seccomp, wire
from autograder.sandbox.limits import Limits, Outcome
from autograder.sandbox.plan import KIT_DIR, RUNNER_FILES, SYSTEM_PATHS, interpreter_paths
from autograder.sandbox.pool import Job, Pool, SandboxUnavailable, Task, choose_mode

from .notebooks import hang
from .unprivileged import (
    NOBODY,
    REPO_ROOT,
    expected_uid,
    require_unprivileged,
    run_json,
    skip_or_fail,
)

pytestmark = pytest.mark.slow

SEED = 4242
LIMITS = Limits(step_seconds=20.0, budget_seconds=120.0, output_bytes=8192)
"""Generous: nothing here should come near a limit but the probes that are about limits."""

BUDGET = Limits(step_seconds=1.0, budget_seconds=3.0)
"""For the time-budget probe: one second a step, three for the whole submission."""

SECRET_ENV = "BACKPROP_NINJA_TEST_SECRET"

SCRATCH = plan.scratch_folder()
"""The submission's scratch: ``/tmp``, or ``/scratch`` where this interpreter lives under
``/tmp`` (a checkout or venv in the temporary folder). The probes say ``/tmp`` and are moved
there by :func:`in_scratch`."""


def in_scratch(code: str) -> str:
    """``code`` with its ``/tmp`` paths in the sandbox's scratch."""
    return code.replace("/tmp", SCRATCH)


# ---------------------------------------------------------------------------------------------
# probes (answer code; ``@NAME@`` is replaced by a JSON value)

FACTS = in_scratch(r"""
import errno, json, os, resource, socket, sys

def attempt(f):
    try:
        r = f()
        return "ok"
    except BaseException as e:
        return type(e).__name__ + (f":{e.errno}" if isinstance(e, OSError) and e.errno else "")

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

def connect(address):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(address)
    finally:
        s.close()

F = {"tmp_at_start": sorted(os.listdir("/tmp"))}
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
F["status"] = {k: status.get(k, "").split() for k in (
    "Uid", "Gid", "CapEff", "CapPrm", "CapInh", "CapAmb", "NoNewPrivs", "Seccomp")}
F["uid"], F["gid"], F["pid"], F["ppid"] = os.getuid(), os.getgid(), os.getpid(), os.getppid()
F["root"] = sorted(os.listdir("/"))
F["runner"] = sorted(os.listdir("/runner"))
F["dev"] = sorted(os.listdir("/dev"))
F["proc_pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
F["proc"] = {}
for pid in (1, 2):
    for what in ("mem", "environ", "maps", "fd/3", "root/"):
        F["proc"][f"{pid}/{what}"] = attempt(lambda: open(f"/proc/{pid}/{what}", "rb").read(1))
F["exists"] = {p: os.path.lexists(p) for p in @HIDDEN@}
F["listdir"] = {}
for p in @LISTED@:
    try:
        F["listdir"][p] = sorted(os.listdir(p))
    except OSError as e:
        F["listdir"][p] = type(e).__name__
F["write"] = {p: attempt(lambda: open(p, "a").close()) for p in @WRITES@}
F["kill"] = {str(t): attempt(lambda: os.kill(t, 0)) for t in (-1, @GRADER@)}
F["nspid"] = status.get("NSpid", "").split()
F["import_kit"] = attempt(lambda: __import__("autograder"))
F["kit_modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("autograder", "tests"))
F["env"] = sorted(os.environ)
F["home"], F["cwd"] = os.environ.get("HOME"), os.getcwd()
F["hostname"] = socket.gethostname()
F["interfaces"] = [name for _, name in socket.if_nameindex()]
F["inet"] = attempt(lambda: socket.create_connection(("1.1.1.1", 53), timeout=2).close())
F["abstract"] = attempt(lambda: connect("\0" + @ABSTRACT@))
F["unix_path"] = attempt(lambda: connect(@UNIX_PATH@))
F["memfd"] = attempt(lambda: os.memfd_create("x"))
F["shm"] = attempt(lambda: open("/dev/shm/x", "w").close())
F["fork"] = attempt(fork)
F["thread"] = attempt(lambda: __import__("threading").Thread(target=int).start())
F["exec"] = attempt(lambda: os.execv(sys.executable, [sys.executable, "-c", "pass"]))
F["system"] = attempt(lambda: os.system("true") == 0 or 1 / 0)
F["ctypes"] = attempt(lambda: __import__("ctypes"))
F["rlimit_as"] = resource.getrlimit(resource.RLIMIT_AS)[0]
F["scratch_write"] = attempt(lambda: open("/tmp/ok", "w").write("x"))
main = sys.modules.get("__main__")
F["runner_state"] = [
    getattr(main, "NATIVE", None) is None,
    len(getattr(main, "BANKS", None) or {}),
    getattr(main, "INSTALL_STEP_FILTER", None) is None,
]
import pickle
import numpy as np
F["unpickle"] = {  # getattr rebuilt from bytes: what the name rule refuses, by another road
    "pickle.loads": attempt(lambda: pickle.loads(pickle.dumps([getattr]))),
    "numpy.load": attempt(lambda: (np.save("/tmp/p.npy", np.array([getattr], dtype=object)),
                                   np.load("/tmp/p.npy", None, True))),
    "torch.load": attempt(lambda: (torch.save([getattr], "/tmp/p.pt"),
                                   torch.load("/tmp/p.pt", weights_only=False))),
}
frame, F["frames"] = sys._getframe(0), []
while frame is not None:
    F["frames"].append(frame.f_code.co_name)
    frame = frame.f_back
dprobs = torch.tensor(list(json.dumps(F).encode()), dtype=torch.uint8)
""")
"""What a submission sees and may do, sent back as the bytes of a uint8 tensor."""

FLOOD = """
import os
for _ in range(64):  # blank lines to push a report out of the alarm pipe, 4 MiB in all
    os.write(4, b"\\n" * (1 << 16))
dh = dlogits @ W2.T
"""
"""An answer that floods the alarm pipe (the supervisor keeps 64 KiB of it, and a flood counts
as a report)."""

HEAP = r"""
import json
import sys

import numpy as np

targets = @TARGETS@  # [key, 4 words] each: 16 bytes from the middle of a tensor


class Raw:  # the process's own memory as an array, without ctypes or /proc/self/mem
    def __init__(self, address, words):
        self.__array_interface__ = {
            "data": (address, True), "shape": (words,), "typestr": "<u4", "version": 3
        }


def search():
    firsts = np.array(sorted({w[0] for _, w in targets}), dtype=np.uint32)
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    regions = []  # copied first: scanning allocates, and the heap may shrink under a view
    for line in maps:
        fields = line.split()
        if fields[1].startswith("rw") and fields[-1] == "[heap]":
            start, end = (int(x, 16) for x in fields[0].split("-"))
            regions.append(np.asarray(Raw(start, (end - start) // 4)).copy())
    found = set()
    for memory in regions:  # where a freed small tensor's bytes stay (a large one's are unmapped)
        for at in range(0, len(memory), 1 << 22):
            chunk = memory[at : at + (1 << 22) + 3]
            for i in np.nonzero(np.isin(chunk[:-3], firsts))[0]:
                window = chunk[i : i + 4].tolist()
                found |= {key for key, w in targets if w == window}
    return sorted(found)


if not hasattr(sys, "_bn_heap"):  # once, in the process's first case
    sys._bn_heap = search()
dW2 = torch.tensor(list(json.dumps(sys._bn_heap).encode()), dtype=torch.uint8)
"""
"""Which of ``targets`` are in the answer's own heap."""


def _heap_targets(grader: Grader, given: tuple[str, ...]) -> list[list[Any]]:
    """16 bytes from the middle of every upstream gradient of the true-upstream cases (there,
    another step's reference): ``[key, words]``, ``key`` being ``case:variable``, with a
    ``given:`` prefix for those the probing step is given (so must find). A gradient whose 16
    bytes are also in an input of the step (``dnorm_logits`` and ``dlogits`` share most
    values) is left out: finding it would prove nothing."""
    cases = grader.cases(EX)
    inputs = [
        t.detach().float().contiguous().numpy().tobytes()
        for case in cases
        for t in [*case.graph.values(), *(case.upstream[u] for u in given)]
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    out: list[list[Any]] = []
    for case in cases:
        if not case.true_upstream:
            continue
        for name, t in case.upstream.items():
            flat = t.detach().reshape(-1).float().contiguous()
            if flat.numel() < 24:
                continue
            window = flat[16:20]
            words = [w & 0xFFFFFFFF for w in window.view(torch.int32).tolist()]
            if len(set(words)) < 4 or 0 in words:  # common in memory: not a quick search
                continue
            if name in given:
                out.append([f"given:{case.name}:{name}", words])
            elif not any(window.numpy().tobytes() in blob for blob in inputs):
                out.append([f"{case.name}:{name}", words])
    return out


REACH = r"""
import sys
found, seen, visited = [], set(), set()

def take(t):
    if isinstance(t, torch.Tensor) and t.is_floating_point() and id(t) not in seen:
        if 0 < t.numel() <= 20_000:
            seen.add(id(t))
            found.append(t.detach().reshape(-1).double())

def walk(o, depth):
    if id(o) in visited or depth > 7:
        return
    visited.add(id(o))
    take(o)
    if isinstance(o, dict):
        for v in list(o.values()):
            walk(v, depth + 1)
    elif isinstance(o, (list, tuple, set, frozenset)):
        for v in list(o):
            walk(v, depth + 1)
    elif not isinstance(o, type(sys)):
        try:
            walk(vars(o), depth + 1)
        except TypeError:
            pass

if not getattr(sys, "_bn_reach_done", False):
    sys._bn_reach_done = True
    frame = sys._getframe(0)
    while frame is not None:
        walk(frame.f_locals, 0)
        walk(frame.f_globals, 1)
        frame = frame.f_back
    for module in list(sys.modules.values()):
        if module is not None:
            walk(vars(module), 1)
parts = [torch.zeros(1, dtype=torch.float64)]
for t in found:
    parts += [torch.tensor([float(t.numel())], dtype=torch.float64), t]
dW2 = torch.cat(parts)
"""
"""Every floating tensor a submission can reach without the collector (which is refused):
frames, their locals and globals, every module, recursively; sent back flattened as
``[0, numel, values..., numel, values...]``."""

TRAP = in_scratch(r"""
import os
os.makedirs("/tmp/a/b/c", exist_ok=True)
open("/tmp/a/b/c/stash", "w").write("for the next submission")
os.symlink("/runner", "/tmp/link-to-runner")
os.symlink("/tmp/a", "/tmp/a/b/loop")
os.mkfifo("/tmp/fifo")
deep = "/tmp/deep"
os.mkdir(deep)
os.chdir(deep)
for _ in range(300):
    os.mkdir("d")
    os.chdir("d")
os.chdir("/tmp")
os.chmod("/tmp/a/b/c", 0)
os.chmod("/tmp/a", 0)
dprobs = (1.0 / probs) * dlogprobs
""")
"""Leaves a tree in the scratch that a naive cleanup cannot remove (no permissions, a symlink
loop, a fifo, 300 levels)."""

LOOK = in_scratch(r"""
import os
dprobs = (1.0 / probs) * dlogprobs
if os.listdir("/tmp"):
    raise RuntimeError(f"found {os.listdir('/tmp')}")
""")


NATIVE_GRAD_MODE = r"""
every_subclass = getattr(type, "__sub" + "classes__")
def every(c, seen):
    for s in every_subclass(c):
        if s not in seen:
            seen.add(s)
            every(s, seen)
    return seen
classes = {c.__name__: c for c in every(object, set())}
lib = classes["CDLL"]("libc10.so")  # ctypes's loader, found without importing it
set_enabled = getattr(lib, "_ZN3c108GradMode11set_enabledEb")
set_enabled.argtypes = [classes["c_bool"]]
set_enabled(True)
x = torch.tensor(hprebn.tolist(), **{"requires" + "_grad": True})
out = ((x - bnmeani) * dbndiff).sum() + (x.mean(0, keepdim=True) * dbnmeani).sum()
set_enabled(False)
root = getattr(out, "grad" + "_fn")
deps, stack, seen = {}, [root], set()
while stack:  # a small engine of its own: the graph's nodes called one by one
    nd = stack.pop()
    if id(nd) in seen:
        continue
    seen.add(id(nd))
    for nx, _ in nd.next_functions:
        if nx is not None:
            deps[id(nx)] = deps.get(id(nx), 0) + 1
            stack.append(nx)
pending, ready = {id(root): [torch.ones(())]}, [root]
while ready:
    nd = ready.pop()
    g = pending.pop(id(nd))
    if type(nd).__name__ == "AccumulateGrad":
        dhprebn = g[0].detach().clone()
        continue
    outs = nd(*g)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for (nx, i), go in zip(nd.next_functions, outs):
        if nx is None:
            continue
        slot = pending.setdefault(id(nx), [None])
        slot[i] = go if slot[i] is None else slot[i] + go
        deps[id(nx)] -= 1
        if deps[id(nx)] == 0:
            ready.append(nx)
"""
"""Grad mode switched on through libc10 itself, with ctypes's loader found among Python's
classes (no import, no name the scan knows), and the graph's nodes called by hand."""

ORIGINAL_GRAD_SWITCH = r"""
import sys
switch = None
for module in list(sys.modules.values()):  # an unpoisoned original kept in some list
    for value in list(getattr(module, "__dict__", {}).values()):
        if isinstance(value, list):
            for x in value:
                if type(x) is type(len) and getattr(x, "__name__", "") == "_set_grad_enabled":
                    switch = x
engines = [c for c in object.__subclasses__() if c.__name__ == "_EngineBase"]
x = getattr(torch._C.TensorBase, "requires" + "_grad_")(h.detach().clone())
switch(True)
out = x @ W2 + b2
switch(False)
(dh,) = engines[0]().run_backward((out,), (dlogits,), False, False, (x,), False, False)
dh = dh.detach()
"""
"""Grad mode switched on through an original ``_set_grad_enabled`` looked for in a list (as
``torch.fx`` keeps one: replaced there too), the engine found among Python's classes."""

GUARD_AND_ENGINE = r"""
engine = [c for c in object.__subclasses__() if c.__name__ == "_EngineBase"][0]
leaf = torch.nn.Parameter(h.clone())
on = torch._C._InferenceMode(False)  # a guard's constructor switches grad mode on
out = leaf @ W2 + b2  # operators only while it is on: no call Python reports
del on
dh = engine().run_backward((out,), (dlogits,), False, False, (leaf,), False, False)[0]
"""
"""Grad mode switched on by one of torch's own guards, the graph recorded through operators
alone, the engine found among Python's classes."""

ORIGINALS_TABLE = r"""
import sys
main = sys.modules["__main__"]
table = getattr(main, "_REP" + "LACED")
originals = {getattr(o, "__name__", ""): o for o, _ in table.values()}
originals["setprofile"](None)  # the watch off, with the original kept in the runner's table
on = torch._C._InferenceMode(False)
leaf = torch.nn.Parameter(h.clone())
out = torch.matmul(leaf, W2) + b2
del on
engine = [c for c in object.__subclasses__() if c.__name__ == "_EngineBase"][0]
dh = engine().run_backward((out,), (dlogits,), False, False, (leaf,), False, False)[0]
"""
"""The originals of what was poisoned, looked up in a table the runner kept."""

ATTACKS: dict[str, tuple[str, str, bool]] = {
    "native-grad-mode": ("dhprebn", NATIVE_GRAD_MODE, False),
    "guard-and-engine": ("dh", GUARD_AND_ENGINE, True),
    "originals-table": ("dh", ORIGINALS_TABLE, False),
    "original-grad-switch": ("dh", ORIGINAL_GRAD_SWITCH, False),  # no original left to find
    "watch-removed": ("dW2", "import sys\nsys.setprofile(None)\ndW2 = h.T @ dlogits", True),
    "getattr-names": (
        "dprobs",
        "ag = getattr(torch, 'auto' + 'grad')\non = getattr(torch, 'enable' + '_grad')\n"
        "x = probs.clone()\nsetattr(x, 'requires' + '_grad', True)\nwith on():\n"
        "    y = x.log()\n(dprobs,) = getattr(ag, 'gr' + 'ad')(y, x, dlogprobs)",
        True,
    ),
    "engine-by-private-names": (
        "dprobs",
        "C_ = getattr(torch, '_' + 'C')\nx = probs.detach().clone()\n"
        "C_.TensorBase.requires_grad_(x)\ngetattr(C_, '_set_' + 'grad_enabled')(True)\n"
        "y = x.log()\nengine = torch.autograd.variable.Variable._execution_engine\n"
        "(dprobs,) = engine.run_backward((y,), (dlogprobs,), False, False, (x,), False, False)",
        True,
    ),
    "thread-starts-with-grad-mode-on": (
        "dprobs",
        "import threading\nout = {}\ndef work():\n    x = probs.detach().clone()\n"
        "    torch._C.TensorBase.requires_grad_(x)\n    y = x.log()\n"
        "    out['g'] = y.grad_fn(dlogprobs)\n"
        "t = threading.Thread(target=work)\nt.start()\nt.join()\ndprobs = out['g']",
        False,
    ),
    "forward-mode-duals": (
        "dprobs",
        "fwd = torch.autograd.forward_ad\nwith fwd.dual_level():\n"
        "    d = fwd.make_dual(probs, dlogprobs)\n"
        "    dprobs = fwd.unpack_dual(d.log()).tangent",
        True,
    ),
    "forward-mode-private": (
        "dprobs",
        "torch._C._enter_dual_level()\nd = torch._make_dual(probs, dlogprobs, level=0)\n"
        "dprobs = torch._unpack_dual(d.log(), 0)[1]",
        True,
    ),
    "torch-func-grad": (
        "dprobs",
        "dprobs = torch.func.grad(lambda p: (p.log() * dlogprobs).sum())(probs)",
        True,
    ),
    "functorch-private": (
        "dprobs",
        "from torch._functorch import eager_transforms as et\n"
        "dprobs = et.grad_impl(lambda p: (p.log() * dlogprobs).sum(), 0, False, (probs,), {})",
        True,
    ),
    "autograd-functional-vjp": (
        "dprobs",
        "dprobs = torch.autograd.functional.vjp(torch.log, probs, dlogprobs)[1]",
        True,
    ),
    "aten-backward-kernel": (
        "dhpreact",
        "dhpreact = getattr(torch.ops.aten, 'tanh_' + 'backward')(dh, h)",
        True,
    ),
    "operator-from-decomposition-table": (
        "dhpreact",
        "import torch._decomp as d\n"
        "op = next(k for k in d.decomposition_table if 'tanh_backward' in str(k))\n"
        "dhpreact = op(dh, h)",
        True,
    ),
    "python-decomposition": (
        "dhpreact",
        "import torch._decomp as d\n"
        "table = d.global_decomposition_table['post_autograd']\n"
        "f = next(v for k, v in table.items() if 'tanh_backward' in str(k))\n"
        "dhpreact = f(dh, h)",
        True,
    ),
    "operator-lookup-by-name": (
        "dhpreact",
        "dhpreact = torch._C._get_operation_overload('aten::tanh_backward', '')[0](dh, h)",
        True,
    ),
    "dispatcher-handle": (
        "dhpreact",
        "op = torch._C._dispatch_find_schema_or_throw('aten::tanh_backward', '')\n"
        "dhpreact = torch._C._dispatch_call_boxed(op, dh, h)",
        True,
    ),
    "torchscript": (
        "dprobs",
        "from typing import List, Optional\ncu = torch.jit.CompilationUnit('''\n"
        "def f(x, g):\n    torch.set_grad_enabled(True)\n"
        "    x = x.detach().requires_grad_()\n    y = x.log()\n"
        "    gs: List[Optional[torch.Tensor]] = [g]\n"
        "    r = torch.autograd.grad([y], [x], gs)\n    torch.set_grad_enabled(False)\n"
        "    return r[0]\n''')\ndprobs = cu.f(probs, dlogprobs)",
        False,
    ),
    "torchscript-existing-unit": (
        "dprobs",
        "cu = torch.jit._state._python_cu\n"
        "cu.define('def f(x):\\n    return x\\n', lambda name: None)\n"
        "dprobs = (1.0 / probs) * dlogprobs",
        False,
    ),
    "ctypes": (
        "dprobs",
        "import ctypes\ndprobs = (1.0 / probs) * dlogprobs",
        False,
    ),
    "fresh-copy-of-torch-C": (
        "dprobs",
        "import importlib.util\nspec = importlib.util.find_spec('torch._C')\n"
        "C2 = importlib.util.module_from_spec(spec)\nC2._set_grad_enabled(True)\n"
        "dprobs = (1.0 / probs) * dlogprobs",
        False,
    ),
    "fresh-copy-of-imp": (
        "dprobs",
        "import sys, importlib.util\ndel sys.modules['_imp']\nimport _imp\n"
        "dprobs = (1.0 / probs) * dlogprobs",
        False,
    ),
    "collector-walk": (
        "dprobs",
        "import gc\nfound = [o for o in gc.get_objects() if type(o) is dict]\n"
        "dprobs = (1.0 / probs) * dlogprobs",
        False,
    ),
    "grad-mode-left-on": (
        "dprobs",
        "torch.set_grad_enabled(True)\ndprobs = (1.0 / probs) * dlogprobs",
        True,
    ),
    "answer-requires-grad": (
        "dprobs",
        "dprobs = ((1.0 / probs) * dlogprobs).requires_grad_()",
        True,
    ),
    "fresh-python-by-subprocess": (
        "dprobs",
        "import subprocess, sys\nout = subprocess.run([sys.executable, '-c', 'print(1)'], "
        "capture_output=True)\ndprobs = (1.0 / probs) * dlogprobs",
        False,
    ),
}
"""Attempts at a gradient without deriving it, or at the ways around the sandbox's record of
autograd: name -> (step, code, whether an autograd report is expected). None may pass; those
marked True must be reported (``uses-autograd``) even though they hide the names."""

ORDINARY: dict[str, tuple[str, str]] = {
    "prints-tensors": (
        "dprobs",
        "print(probs[0, :3])\nprint(repr(dlogprobs.sum()), probs.max())\n"
        "dprobs = (1.0 / probs) * dlogprobs",
    ),
    "warns": (
        "dprobs",
        "import sys, warnings\nwarnings.warn('careful')\nprint('careful', file=sys.stderr)\n"
        "dprobs = (1.0 / probs) * dlogprobs",
    ),
    "no-grad-and-inference-mode": (
        "dprobs",
        "with torch.no_grad():\n    a = 1.0 / probs\nwith torch.inference_mode():\n"
        "    b = a * 1\ndprobs = b.clone() * dlogprobs\nassert not torch.is_grad_enabled()",
    ),
    "imports": (
        "dprobs",
        "import math, random, statistics, collections, itertools, functools, decimal\n"
        "import numpy as np\nimport torch.nn.functional as F2\n"
        "dprobs = torch.from_numpy(np.asarray(1.0 / probs.numpy())) * dlogprobs",
    ),
    "float64-and-scratch": (
        "dprobs",
        in_scratch(
            "import numpy as np\nprobs.numpy().tofile('/tmp/p.bin')\n"
            "p = torch.from_numpy(np.fromfile('/tmp/p.bin', dtype=np.float32)).view_as(probs)\n"
            "dprobs = ((1.0 / p.double()) * dlogprobs.double()).float()"
        ),
    ),
    "ops-by-name": (
        "dprobs",
        "dprobs = torch.ops.aten.reciprocal(probs) * dlogprobs",
    ),
}
"""Ordinary answers that touch what the sandbox guards: each must pass without a diagnosis."""


# ---------------------------------------------------------------------------------------------
# one variant, from start to close


def _allowed_children() -> dict[str, set[str]]:
    """For each folder on the way to a path the sandbox binds, the entries it may show."""
    binds, _ = interpreter_paths()
    allowed: dict[str, set[str]] = {}
    for path in [*SYSTEM_PATHS, *binds, "/runner", SCRATCH, "/dev", "/proc"]:
        parts = Path(path).parts
        for i in range(1, len(parts)):
            allowed.setdefault(str(Path(*parts[:i])), set()).add(parts[i])
    return allowed


def _fill(code: str, **values: Any) -> str:
    for key, value in values.items():
        code = code.replace(f"@{key}@", json.dumps(value))
    return code


def _decode(outcome: Outcome, case_names: list[str]) -> Any:
    assert outcome.status == "ok", (outcome.status, outcome.detail, outcome.output)
    answer = parse_payload(outcome.payload, case_names)[case_names[0]]
    assert answer.tensor is not None, (answer.kind, answer.error, outcome.output)
    return answer.tensor


def _run_tasks(grader: Grader, tasks: list[Task]) -> dict[Any, Outcome]:
    grader.cases(EX)
    return dict(grader.pool.run([Job(EX.id, tuple(tasks))]))


def _leaked_references(
    grader: Grader, flat: torch.Tensor, given: tuple[str, ...]
) -> dict[str, list[str]]:
    """References of the hidden cases found among the tensors the probe reached, and not equal
    to any input of its own step (the graph and the ``given`` upstream gradients): case name
    -> steps."""
    cases = grader.cases(EX)
    reached: dict[int, list[torch.Tensor]] = {}
    i = 1
    while i < flat.numel():
        n = int(flat[i])
        reached.setdefault(n, []).append(flat[i + 1 : i + 1 + n])
        i += 1 + n
    inputs: dict[int, list[torch.Tensor]] = {}
    for case in cases:
        for t in [*case.graph.values(), *(case.upstream[u] for u in given)]:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                inputs.setdefault(t.numel(), []).append(t.detach().reshape(-1).double())

    def near(ref: torch.Tensor, pool: list[torch.Tensor], tol: float) -> bool:
        return any(float((t - ref).abs().max()) <= tol for t in pool)

    leaked: dict[str, list[str]] = {}
    found_any = 0
    for case in cases:
        for step in EX.steps:
            ref = case.reference(step).reshape(-1).double()
            tol = RTOL * case.scale(step)
            if near(ref, reached.get(ref.numel(), []), tol):
                found_any += 1
                if not near(ref, inputs.get(ref.numel(), []), tol):
                    leaked.setdefault(case.name, []).append(step.name)
    leaked["_found"] = [str(found_any), str(sum(len(v) for v in reached.values()))]
    return leaked


def _trap_and_look(grader: Grader, names: list[str]) -> dict[str, Any]:
    """A step leaves traps in its scratch; a later step of its submission, and the next
    submission, look for them."""
    step = EX.step("dprobs")
    trap = Task("trap", step.name, step.upstream, TRAP, False)
    look = Task("look", step.name, step.upstream, LOOK, False)
    later = Task("later", step.name, step.upstream, LOOK.replace("probs)", "probs) * 1"), False)
    started = grader.pool.started
    got = dict(grader.pool.run([Job(EX.id, (trap, later))]))
    got.update(grader.pool.run([Job(EX.id, (look,))]))
    report: dict[str, Any] = {"restarted": grader.pool.started - started}
    report["trap"] = [got["trap"].status, got["trap"].detail]
    for key in ("later", "look"):
        answer = parse_payload(got[key].payload, names)[names[0]]
        report[key] = [got[key].status, answer.kind, answer.error]
    return report


MEMORY = Limits(step_seconds=30.0, budget_seconds=90.0, memory_bytes=128 * 2**20)
MEMORY = Limits(**{**MEMORY.__dict__, "tmp_bytes": 512 * 2**20})
"""An answer may add 128 MiB; its scratch may hold 512 MiB, more than the sandbox may."""

FILL = in_scratch(
    "for i in range(80):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * 2**23)\n"
    "dprobs = (1.0 / probs) * dlogprobs"
)
"""640 MiB of files (memory no process's size counts): more than the scratch holds."""


def _beyond_memory(mode: str) -> dict[str, Any]:
    """A step fills its scratch beyond what the sandbox may use; the next one answers."""
    grader = Grader(seed=SEED, limits=MEMORY, jobs=1, sandbox=mode)
    try:
        names = [c.name for c in grader.cases(EX)]
        step = EX.step("dprobs")
        tasks = (
            Task("fill", step.name, step.upstream, FILL, False),
            Task("after", step.name, step.upstream, step.answer, False),
        )
        got = dict(grader.pool.run([Job(EX.id, tasks)]))
        fill = got["fill"]
        kind = ""
        if fill.status == "ok":
            answer = parse_payload(fill.payload, names)[names[0]]
            kind = f"{answer.kind}: {answer.error}"
        return {
            "cgroup": any(s.cgroup is not None for s in grader.pool.slots),
            "fill": [fill.status, fill.detail, kind],
            "after": got["after"].status,
            "started": grader.pool.started,
        }
    finally:
        grader.close()


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def explore(mode: str) -> dict[str, Any]:
    """Everything the tests assert, for a Grader of ``mode`` in this process, as plain data."""
    report: dict[str, Any] = {"uid": os.getuid()}
    before = _children()
    host = Path(tempfile.mkdtemp(prefix="bn-host-"))
    course = host / "course"
    (course / "submitted" / "classmate").mkdir(parents=True)
    (course / "gradebook.db").write_text("grades")
    (course / "submitted" / "classmate" / "backprop_ninja.ipynb").write_text("{}")
    unix_path = str(host / "grader.sock")
    listeners = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    abstract = f"bn-test-{os.getpid()}"
    listeners[0].bind(unix_path)
    listeners[1].bind("\0" + abstract)
    for s in listeners:
        s.listen(1)
    os.environ[SECRET_ENV] = "do-not-leak"
    grader = Grader(seed=SEED, limits=LIMITS, jobs=1, sandbox=mode)
    try:
        report["confinement"] = grader.confinement
        names = [c.name for c in grader.cases(EX)]
        home = str(Path.home())
        facts = _fill(
            FACTS,
            HIDDEN=[str(course), str(KIT_DIR), str(REPO_ROOT / "tests"), unix_path, home + "/.ssh"],
            LISTED=sorted({str(REPO_ROOT), home, "/etc", "/tmp", SCRATCH}),
            WRITES=[
                "/x",
                "/usr/x",
                "/etc/x",
                "/dev/x",
                "/runner/runner.py",
                "/proc/sys/kernel/domainname",
                str(Path(sys.executable).resolve().parent / "x"),
                str(Path(torch.__file__).parent / "x"),
            ],
            GRADER=os.getpid(),
            ABSTRACT=abstract,
            UNIX_PATH=unix_path,
        )
        heap = _fill(HEAP, TARGETS=_heap_targets(grader, EX.step("dW2").upstream))
        tasks = [
            Task("facts", "dprobs", ("dlogprobs",), facts, False),
            Task("flood", "dh", EX.step("dh").upstream, FLOOD, False),
            Task("reach", "dW2", EX.step("dW2").upstream, REACH, False),
            Task("heap", "dW2", EX.step("dW2").upstream, heap, False),
        ]
        outcomes = _run_tasks(grader, tasks)
        report["facts"] = json.loads(bytes(_decode(outcomes["facts"], names).tolist()))
        report["flood"] = outcomes["flood"].autograd
        reached = _decode(outcomes["reach"], names)
        report["leaked"] = _leaked_references(grader, reached, EX.step("dW2").upstream)
        report["heap"] = json.loads(bytes(_decode(outcomes["heap"], names).tolist()))
        report["allowed_children"] = {k: sorted(v) for k, v in _allowed_children().items()}

        items = [(EX, EX.step(step), code) for step, code, _ in ATTACKS.values()]
        items += [(EX, EX.step(step), code) for step, code in ORDINARY.values()]
        results = grader.grade_codes(items)
        keys = [*ATTACKS, *ORDINARY]
        report["graded"] = {k: asdict(r) for k, r in zip(keys, results, strict=True)}

        report.update(_trap_and_look(grader, names))
    finally:
        grader.close()
        for s in listeners:
            s.close()
        os.environ.pop(SECRET_ENV, None)
        shutil.rmtree(host, ignore_errors=True)

    report["memory"] = _beyond_memory(mode)
    budget = Grader(seed=SEED, limits=BUDGET, jobs=1, sandbox=mode)
    try:
        budget.cases(EX)
        steps = [s for s in EX.steps[:8]]
        tasks = [
            Task(s.name, s.name, s.upstream, hang(s.name, spin=i == 0), False)
            for i, s in enumerate(steps)
        ]
        got = dict(budget.pool.run([Job(EX.id, tuple(tasks))]))
        report["budget"] = [
            [name, got[name].status, got[name].detail, got[name].seconds, got[name].own]
            for name in [s.name for s in steps]
        ]
        copy = budget.pool.copy
        cgroups = [str(s.cgroup.path) for s in budget.pool.slots if s.cgroup is not None]
    finally:
        budget.close()
    report["left"] = sorted(_children() - before)
    report["copy_left"] = os.path.exists(os.path.dirname(copy))
    report["cgroups_left"] = [c for c in cgroups if os.path.exists(c)]
    return report


# ---------------------------------------------------------------------------------------------
# the variants

VARIANTS = [("root", "userns"), ("root", "bwrap"), ("nobody", "userns"), ("nobody", "bwrap")]


def _available(mode: str) -> None:
    if mode == "bwrap" and shutil.which("bwrap") is None:
        skip_or_fail("bubblewrap is not installed: its confinement cannot be tested")


@pytest.fixture(scope="module", params=VARIANTS, ids=["-".join(v) for v in VARIANTS])
def seen(request: pytest.FixtureRequest, names_txt: Path) -> dict[str, Any]:
    user, mode = request.param
    _available(mode)
    if user == "root":
        if os.geteuid() != 0:
            pytest.skip("the suite runs without root: the nobody variant covers this machine")
        try:
            return {**explore(mode), "user": user}
        except SandboxUnavailable as e:
            skip_or_fail(f"no {mode} sandbox here: {e}")
    require_unprivileged()
    code = (
        "import json\nfrom tests.test_sandbox import explore\n"
        f"print(json.dumps(explore({mode!r})))\n"
    )
    env = dict(os.environ, BACKPROP_NINJA_NAMES=str(names_txt), PYTHONPATH=str(REPO_ROOT))
    return {**run_json(code, env=env, timeout=900), "user": user}


# ---------------------------------------------------------------------------------------------
# confinement


def test_answers_run_as_nobody_without_capabilities_under_seccomp(seen: dict[str, Any]) -> None:
    f = seen["facts"]
    assert seen["uid"] == (0 if seen["user"] == "root" else expected_uid())  # the grader's
    assert f["uid"] == f["gid"] == NOBODY  # nobody as root; unmapped (so nobody) otherwise
    status = f["status"]
    for caps in ("CapEff", "CapPrm", "CapInh", "CapAmb"):
        assert status[caps] == ["0000000000000000"], caps
    assert status["NoNewPrivs"] == ["1"]
    assert status["Seccomp"] == ["2"]
    assert f["rlimit_as"] > 0  # an address-space limit (-1 is unlimited)


def test_the_filesystem_is_the_interpreter_read_only_and_a_private_scratch(
    seen: dict[str, Any],
) -> None:
    f, allowed = seen["facts"], seen["allowed_children"]
    assert set(f["root"]) <= set(allowed["/"])
    assert f["runner"] == sorted(RUNNER_FILES)
    devices = {"full", "null", "random", "urandom", "zero"}
    links = {"fd", "stdin", "stdout", "stderr"}
    bwrap = {"ptmx", "pts", "tty", "core", "shm"}  # its own pty, a link to kcore, read-only shm
    assert devices | links <= set(f["dev"]) <= devices | links | bwrap
    for folder, entries in f["listdir"].items():
        if folder == SCRATCH:
            continue
        if isinstance(entries, list):  # what shows of a folder is only the way to a bind
            assert set(entries) <= set(allowed.get(folder, [])), folder
    assert f["tmp_at_start"] == [] == f["listdir"][SCRATCH]
    assert f["home"] == f["cwd"] == SCRATCH
    assert f["scratch_write"] == "ok"
    for path, result in f["write"].items():
        assert result.split(":")[0] in ("OSError", "PermissionError"), (path, result)
        assert result.split(":")[-1] in ("30", "13", "1"), (path, result)  # EROFS, EACCES


def test_no_course_folder_home_classmate_gradebook_or_kit_source_is_visible(
    seen: dict[str, Any],
) -> None:
    f = seen["facts"]
    assert f["exists"] and not any(f["exists"].values()), f["exists"]
    assert f["import_kit"] == "ModuleNotFoundError"
    # The runner's module keeps no bank, native call or filter installer, and the supervisor's
    # frames (every step's inputs, the whole request) are not on an answer's stack.
    assert f["runner_state"] == [True, 0, True]
    assert not {"supervise", "_run_group", "_spawn"} & set(f["frames"]), f["frames"]
    assert f["kit_modules"] == []
    assert f"{SECRET_ENV}" not in f["env"]
    kept = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR", "PYTHONHASHSEED"}
    kept |= {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"}
    kept |= {"BACKPROP_NINJA_SECCOMP", "BACKPROP_NINJA_NEST", "PWD"}  # bwrap sets PWD
    assert set(f["env"]) <= kept


def test_its_proc_is_its_own_and_no_process_outside_can_be_signalled(
    seen: dict[str, Any],
) -> None:
    f = seen["facts"]
    assert f["ppid"] == 0 and len(f["nspid"]) == 2  # its parent is outside its PID namespace
    assert len(f["proc_pids"]) <= 8 and max(f["proc_pids"]) < 100  # the sandbox's, not ours
    for what, result in f["proc"].items():  # the runner's and the supervisor's memory, fds
        assert result.startswith(("PermissionError", "FileNotFoundError")), (what, result)
    assert set(f["kill"].values()) == {"ProcessLookupError:3"}, f["kill"]


def test_no_network_no_host_socket(seen: dict[str, Any]) -> None:
    f = seen["facts"]
    assert f["hostname"] == "sandbox"
    assert f["interfaces"] == ["lo"]
    assert f["inet"].startswith("OSError") or f["inet"].startswith("PermissionError")
    assert f["abstract"] == "ConnectionRefusedError:111"  # the namespace's own, empty
    assert f["unix_path"] == "FileNotFoundError:2"


def test_no_memory_outside_a_process_no_new_process_no_program(seen: dict[str, Any]) -> None:
    f = seen["facts"]
    assert f["memfd"] == "PermissionError:1"
    assert f["shm"].split(":")[0] in ("FileNotFoundError", "OSError", "PermissionError")
    assert f["fork"] == "PermissionError:1"
    assert f["thread"] == "RuntimeError"
    assert f["exec"] == "PermissionError:1"
    assert f["system"] != "ok"
    assert f["ctypes"] in ("ImportError", "ModuleNotFoundError")
    unpickled = f["unpickle"]  # torch.load subclasses pickle's Unpickler: a TypeError now
    assert unpickled["pickle.loads"] == unpickled["numpy.load"] == "RuntimeError"
    assert unpickled["torch.load"] in ("RuntimeError", "TypeError")


def test_a_flood_on_the_alarm_pipe_is_a_report_and_costs_the_supervisor_64_kib(
    seen: dict[str, Any],
) -> None:
    assert seen["flood"] == ["the alarm pipe, flooded"]


# ---------------------------------------------------------------------------------------------
# nothing of the grader inside


def test_no_reference_is_within_reach_of_an_answer(seen: dict[str, Any]) -> None:
    leaked = dict(seen["leaked"])
    found, reached = (int(x) for x in leaked.pop("_found"))
    assert reached > 50 and found > 0  # the probe saw the inputs (the lecture case's are true)
    assert leaked == {}  # every reference it could reach is an input it was given anyway


def test_no_other_steps_gradient_is_left_in_an_answers_memory(seen: dict[str, Any]) -> None:
    # An answer can read its own memory (numpy over a raw address): the runner's banks hold
    # every step's upstream gradients, which in a true-upstream case are other steps'
    # references; a tensor merely dropped leaves its bytes in freed memory.
    found = seen["heap"]
    assert any(k.startswith("given:") for k in found)  # the probe finds what it was given
    assert [k for k in found if not k.startswith("given:")] == []


def test_autograd_by_any_route_is_reported_or_refused_and_never_passes(
    seen: dict[str, Any],
) -> None:
    graded = seen["graded"]
    for name, (_, _, reported) in ATTACKS.items():
        result = graded[name]
        codes = [d["code"] for d in result["diagnoses"]]
        assert not result["passed"] and result["score"] == 0, (name, codes)
        assert codes, name
        if reported:
            assert "uses-autograd" in codes, (name, result["diagnoses"])


def test_ordinary_answers_near_the_guards_pass_without_a_diagnosis(seen: dict[str, Any]) -> None:
    for name in ORDINARY:
        result = seen["graded"][name]
        assert result["passed"] and result["diagnoses"] == [], (name, result["diagnoses"])


# ---------------------------------------------------------------------------------------------
# scratch, time, leftovers


def test_a_submission_finds_the_scratch_empty_whatever_the_last_one_left(
    seen: dict[str, Any],
) -> None:
    assert seen["trap"][0] == "ok", seen["trap"]
    assert seen["later"] == ["ok", "tensor", None], seen["later"]  # each step its own scratch
    assert seen["look"] == ["ok", "tensor", None], seen["look"]
    assert seen["restarted"] == 0  # emptied, not replaced (a sandbox it cannot empty would be)


def test_without_namespaces_of_its_own_a_submission_still_finds_an_empty_scratch_each_step(
    names_txt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel refuses namespaces of a submission's own, its steps use the sandbox's
    scratch, which the supervisor empties after each and the runner after the submission,
    whatever it holds."""
    monkeypatch.setenv("BACKPROP_NINJA_NEST", "0")
    grader = Grader(seed=SEED, limits=LIMITS, jobs=1)
    try:
        names = [c.name for c in grader.cases(EX)]
        seen = _trap_and_look(grader, names)
    finally:
        grader.close()
    assert seen["trap"][0] == "ok", seen["trap"]
    assert seen["later"] == ["ok", "tensor", None], seen["later"]
    assert seen["look"] == ["ok", "tensor", None], seen["look"]
    assert seen["restarted"] == 0


def test_a_submission_whose_answers_loop_costs_one_budget_and_the_rest_is_not_run(
    seen: dict[str, Any],
) -> None:
    rows = seen["budget"]
    assert [r[1] for r in rows] == ["timeout"] * len(rows)
    stopped = [r for r in rows if "killed after" in r[2]]
    not_run = [r for r in rows if "budget" in r[2]]
    assert len(stopped) + len(not_run) == len(rows)
    assert stopped and not_run and not_run[-1] == rows[-1]  # the last ones never ran
    assert all(r[4] is True for r in stopped)  # its own limit: the answer's own outcome
    assert all(r[4] is False for r in not_run)  # the budget: not to be shared with others
    assert all(r[3] == 0 for r in not_run if r[2].startswith("not run"))
    assert sum(r[3] for r in rows) <= BUDGET.budget_seconds + 0.5  # measured in the sandbox


def test_memory_beyond_the_sandboxs_limit_costs_the_answer_alone_with_a_clear_reason(
    seen: dict[str, Any],
) -> None:
    """Files in the scratch are memory no process's size counts. As root, the sandbox's
    memory cgroup stops them and the kernel kills the answer (first in line), and the grader
    says why; without root (no cgroup to make), the scratch's own size stops them."""
    memory = seen["memory"]
    if seen["user"] == "root" and not memory["cgroup"]:
        skip_or_fail("root cannot make a memory cgroup here (no writable memory controller)")
    status, detail, kind = memory["fill"]
    if memory["cgroup"]:
        assert status == "crashed" and "out of memory (the sandbox's memory limit)" in detail
    else:
        assert status == "ok" and kind.startswith("error: OSError") and "No space" in kind
    assert memory["after"] == "ok" and memory["started"] == 1  # the same sandbox went on


def test_closing_the_grader_leaves_no_process_runner_copy_or_cgroup(seen: dict[str, Any]) -> None:
    assert seen["left"] == []
    assert seen["copy_left"] is False
    assert seen["cgroups_left"] == []


# ---------------------------------------------------------------------------------------------
# the parts, without a sandbox


def test_an_unknown_mode_is_refused_with_the_choices() -> None:
    with pytest.raises(SandboxUnavailable, match="auto, userns, bwrap, none"):
        choose_mode("chroot")


def test_the_step_filter_refuses_every_clone_and_the_sandbox_filter_only_namespaces() -> None:
    if not seccomp.supported():
        skip_or_fail("seccomp numbers are not known for this machine")
    step = seccomp.program(seccomp.STEP, no_clone=True)
    sandbox = seccomp.program(seccomp.SANDBOX, no_clone=False)
    assert {"unshare", "mount"} <= set(seccomp.STEP) and "unshare" not in seccomp.SANDBOX
    assert {"execve", "memfd_create", "ptrace", "setns", "bpf"} <= set(seccomp.SANDBOX)
    assert len(step) < len(sandbox)  # fewer names, and no flag test on clone


MQUEUE = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
import seccomp
libc = ctypes.CDLL(None, use_errno=True)
name, flags = b"/bn-test-%d" % os.getpid(), os.O_CREAT | os.O_RDWR
def attempt():
    fd = libc.mq_open(name, flags, 0o600, None)
    if fd >= 0:
        os.close(fd)
        libc.mq_unlink(name)
        return "ok"
    return os.strerror(ctypes.get_errno())
before = attempt()
seccomp.install(seccomp.SANDBOX)
print(json.dumps([before, attempt()]))
"""
"""POSIX message queues (a channel between submissions, in the sandbox's IPC namespace) before
and after the sandbox's filter."""


def _before_and_after_the_filter(script: str) -> tuple[Any, Any]:
    """What ``script`` printed: its attempts before and after it installed the sandbox's filter
    (in a process of its own: a filter cannot be taken off)."""
    if not seccomp.supported():
        skip_or_fail("seccomp numbers are not known for this machine")
    done = subprocess.run(
        [sys.executable, "-c", script, str(plan.SANDBOX_DIR)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    before, after = json.loads(done.stdout)
    return before, after


def test_the_sandbox_filter_refuses_posix_message_queues() -> None:
    before, after = _before_and_after_the_filter(MQUEUE)
    assert before == "ok"  # they work here: the filter is what refuses them
    assert after == os.strerror(errno.EPERM)


MOUNT_CALLS = r"""
import ctypes, json, os, sys
sys.path.insert(0, sys.argv[1])
import seccomp
libc = ctypes.CDLL(None, use_errno=True)
numbers = {"open_tree": 428, "open_tree_attr": 467}  # one numbering on x86_64 and aarch64
def attempt(name):  # a mount's O_PATH fd (needs no capability): open_tree(AT_FDCWD, "/", 0)
    fd = libc.syscall(numbers[name], -100, b"/", 0, None, 0)
    if fd >= 0:
        os.close(fd)
        return "ok"
    return os.strerror(ctypes.get_errno())
before = {n: attempt(n) for n in ("open_tree", "open_tree_attr")}
seccomp.install(seccomp.SANDBOX)
print(json.dumps([before, {n: attempt(n) for n in before}]))
"""
"""The calls that open a mount (``open_tree`` and its newer form ``open_tree_attr``), before and
after the sandbox's filter."""


def test_the_sandbox_filter_refuses_both_calls_that_open_a_mount() -> None:
    before, after = _before_and_after_the_filter(MOUNT_CALLS)
    assert before["open_tree"] == "ok"  # it works here: the filter is what refuses it
    assert after == {
        "open_tree": os.strerror(errno.EPERM),
        "open_tree_attr": os.strerror(errno.EPERM),
    }


def test_the_wire_refuses_garbage_and_frames_over_the_cap() -> None:
    reader = wire.Reader(max_body=16)
    with pytest.raises(wire.WireError):
        reader.feed(b"XXXX" + bytes(16))
    big = wire.encode({"op": "x"}, [b"y" * 32])
    with pytest.raises(wire.WireError):
        wire.Reader(max_body=16).feed(big[:24])
    with pytest.raises(ValueError):
        wire.encode({"n": float("nan")})
    ok = wire.Reader(max_body=64).feed(wire.encode({"op": "x"}, [b"abc"]) * 2)
    assert ok == [({"op": "x"}, [b"abc"])] * 2


@pytest.fixture
def private_pool(names_txt: Path) -> Iterator[Pool]:
    grader = Grader(seed=SEED, limits=Limits(step_seconds=20.0, budget_seconds=60.0), jobs=1)
    grader.cases(EX)
    try:
        yield grader.pool
    finally:
        grader.close()


def test_a_grader_killed_outright_takes_its_sandboxes_along(
    names_txt: Path, tmp_path: Path
) -> None:
    """SIGKILL leaves no chance to clean up: each sandbox's launcher dies with its parent."""
    code = (
        "import sys, time\nsys.path.insert(0, sys.argv[1])\n"
        "from autograder.engine.grader import Grader\n"
        "from autograder.sandbox.limits import Limits\n"
        "g = Grader(seed=1, limits=Limits(), jobs=2)\n"
        "g.pool.warm()\nprint('up', g.pool.copy, flush=True)\ntime.sleep(600)\n"
    )
    proc = psutil.Popen(
        [sys.executable, "-c", code, str(REPO_ROOT)],
        stdout=-1,
        text=True,
        # its runner's copy goes to a folder of its own: no other grader's sweep takes it
        env=dict(os.environ, BACKPROP_NINJA_NAMES=str(names_txt), TMPDIR=str(tmp_path)),
    )
    try:
        assert proc.stdout is not None
        up, copy = proc.stdout.readline().split()
        assert up == "up" and os.path.isdir(copy)
        tree = proc.children(recursive=True)
        assert tree  # the launchers and what they started
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        _, alive = psutil.wait_procs(tree, timeout=60)
        assert alive == [], [p.pid for p in alive]
        deadline = time.monotonic() + 60  # its cgroups go once the kernel has let all go
        while memory.sweep() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.sweep() == []
        assert os.path.dirname(copy) in plan.sweep_runner_copies(str(tmp_path))  # its copy too
        assert not os.path.exists(copy)
    finally:
        with contextlib.suppress(psutil.Error):
            proc.kill()
        with contextlib.suppress(psutil.Error, OSError):
            proc.wait(10)


def test_an_answer_that_stops_or_kills_everything_it_can_costs_only_itself(
    private_pool: Pool,
) -> None:
    """Without a PID namespace of its own an answer could reach its supervisor; with one it
    reaches nothing but its namespace's keeper, which ignores it, and the submission's other
    steps go on in the same sandbox."""
    step = EX.step("dprobs")
    hostile = (
        "import os, signal\nfor sig in (signal.SIGSTOP, signal.SIGKILL):\n"
        "    for pid in (-1, 1, 2, 3, 4, 5, 6, os.getppid()):\n"
        "        if pid not in (0, os.getpid()):\n"
        "            try:\n                os.kill(pid, sig)\n            except OSError:\n"
        "                pass\ndprobs = (1.0 / probs) * dlogprobs"
    )
    tasks = [Task("hostile", step.name, step.upstream, hostile, False)]
    tasks += [Task(f"after{i}", step.name, step.upstream, step.answer, False) for i in range(3)]
    started = private_pool.started
    got = dict(private_pool.run([Job(EX.id, tuple(tasks))]))
    assert {k: o.status for k, o in got.items()} == dict.fromkeys(got, "ok"), got
    assert private_pool.started == started  # the same sandbox went on
    # the next submission finds the sandbox as new
    again = dict(private_pool.run([Job(EX.id, (tasks[1],))]))
    assert again["after0"].status == "ok"


def test_the_pool_takes_more_jobs_than_sandboxes_one_outcome_each(private_pool: Pool) -> None:
    step = EX.step("dprobs")
    jobs = [
        Job(EX.id, (Task(f"ok{i}", step.name, step.upstream, step.answer, True),)) for i in range(6)
    ]
    got = dict(private_pool.run(jobs))
    assert sorted(map(str, got)) == [f"ok{i}" for i in range(6)]
    assert all(o.status == "ok" and o.own for o in got.values())


def test_the_scratch_never_covers_what_the_sandbox_must_see() -> None:
    # A venv made in the temporary folder (a course's CI, the wheel check) must stay visible.
    assert plan.scratch_path(["/usr", "/opt/venv/lib"]) == "/tmp"
    assert plan.scratch_path(["/usr", "/tmp/tmp.x/venv/lib"]) == "/scratch"
    assert plan.scratch_path(["/tmp/a", "/scratch"]) == "/backprop-ninja-scratch"
    with pytest.raises(RuntimeError):
        plan.scratch_path(["/"])


def test_a_copy_being_made_is_never_swept_and_one_left_half_made_is_in_time(
    tmp_path: Path,
) -> None:
    """Two graders starting at once: the one sweeping must not take the other's copy before
    its lock is held. A copy is made under a pending name and renamed once locked; a pending
    folder is swept only when it is old (its maker died half way)."""
    fresh = tmp_path / (plan.PENDING_PREFIX + "fresh")
    old = tmp_path / (plan.PENDING_PREFIX + "old")
    for folder in (fresh, old):
        folder.mkdir()
        (folder / ".lock").touch()  # a lock file not yet locked: the moment of the race
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert plan.sweep_runner_copies(str(tmp_path)) == [str(old)]
    assert fresh.is_dir()
    made = plan.runner_copy()
    try:
        top = os.path.basename(os.path.dirname(made))
        assert top.startswith(plan.COPY_PREFIX) and os.path.isfile(os.path.join(made, "runner.py"))
        assert os.path.dirname(made) not in plan.sweep_runner_copies()  # locked: in use
    finally:
        plan.remove_runner_copy(made)

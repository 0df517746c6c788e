"""Hostile submissions through the real engine and the real sandbox: nothing is mocked.

One batch, graded by one Grader, holds a clean notebook beside notebooks whose answer cells exit,
signal, loop, sleep, allocate, flood, fork, monkeypatch, lie, cheat, stash files, loop in every
step or answer NaN, and beside files that are no notebook at all. Every hostile cell is one step
of a notebook whose other steps are the model solution; each test checks one claim about that
batch: the hostile step gets 0 with a reason, the other steps of its notebook pass, the clean
notebook gets 26, the results are strict JSON, and no process or scratch folder is left. The
batch is graded twice: by a grader running as root, and by one running as ``nobody`` (see
:mod:`tests.unprivileged`), which sends its results back as JSON.

Steps time out after 2 s and a notebook's budget is 12 s, so a batch takes well under a minute;
no assertion depends on the machine's speed (a bound on a step's measured seconds is the
sandbox's own deadline, not a wall clock of this test).

``test_interrupted.py`` interrupts ``backprop-ninja grade --json`` (Ctrl-C, and SIGKILL) and
resumes it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest

from autograder.engine.grader import Grader
from autograder.exercises import DEFAULT as EX
from autograder.grading.results import StepResult, SubmissionResult, run_from_json
from autograder.reports.report import render_feedback, render_report
from autograder.reports.text import diagnoses_text
from autograder.sandbox.limits import Limits
from autograder.sandbox.plan import scratch_folder

from .notebooks import hang, make_notebook
from .unprivileged import (
    NOBODY,
    child_env,
    remove_shared,
    require_unprivileged,
    run_json,
    shared_folder,
)

pytestmark = pytest.mark.slow

LIMITS = Limits(
    step_seconds=2.0, budget_seconds=12.0, memory_bytes=512 * 2**20, result_bytes=4 * 2**20
)
"""Short steps and budget for the batch (the clean notebook comes first, so every model answer
runs in its job and a hostile notebook's budget pays for its hostile steps only); a small result
cap, which an 8 MiB answer per case exceeds."""

MAX_ELEMENTS = 1 << 24
"""The most elements an answer may have (``runner.MAX_ELEMENTS``)."""

SOLUTION = {s.name: s.answer for s in EX.steps}

KILL_EVERY_PID = """\
import os, signal
for pid in range(0, 400):
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
"""

STOP_THE_PARENT = """\
import os, signal
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGSTOP):
    for pid in (os.getppid(), 0, 1, 2):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
"""

AUTOGRAD_BY_GETATTR = """\
ag = getattr(torch, 'auto' + 'grad')
on = getattr(torch, 'enable' + '_grad')
x = probs.clone()
setattr(x, 'requires' + '_grad', True)
with on():
    y = x.log()
(dprobs,) = getattr(ag, 'gr' + 'ad')(y, x, dlogprobs)
"""

AUTOGRAD_BY_ENGINE = """\
C_ = getattr(torch, '_' + 'C')
x = norm_logits.clone()
C_.TensorBase.requires_grad_(x)
getattr(C_, '_set_' + 'grad_enabled')(True)
y = logits - x
engine = getattr(torch, 'auto' + 'grad').variable.Variable._execution_engine
(g,) = engine.run_backward((y,), (dnorm_logits,), False, False, (x,), False, False)
getattr(C_, '_set_' + 'grad_enabled')(False)
dlogit_maxes = g.detach().sum(1, keepdim=True)
"""

AUTOGRAD_THROUGH_A_GUARD = """\
E = [c for c in object.__subclasses__() if c.__name__ == '_EngineBase'][0]()
G = getattr(torch._C, '_Inference' + 'Mode')
x = torch.zeros_like(logits, **{'requires_' + 'grad': True})
x.copy_(logits)
ce = torch._C._nn.cross_entropy_loss
guard = G(False)  # grad mode on: a class called, no call the profile hook sees
loss = list(map(ce, [x], [Yb], [None], [1], [-100], [0.0]))[0]  # called from C: unseen too
del guard
dlogits = list(map(E.run_backward, [(loss,)], [(torch.ones(()),)], [False], [False], [(x,)],
                   [True], [False]))[0][0]
"""
"""Autograd with no call the grad-mode watch sees: grad mode switched on by a C++ guard's
class, the graph recorded by operators and by functions called from ``map``, the engine found
among Python's classes. What gives it away is the graph recorded."""

AUTOGRAD_FORWARD_MODE = """\
fwd = getattr(torch, 'auto' + 'grad').forward_ad
with fwd.dual_level():
    dual = fwd.make_dual(norm_logits, torch.ones_like(norm_logits))
    tangent = fwd.unpack_dual(dual.exp()).tangent
dnorm_logits = tangent * dcounts
"""

ANSWER_FROM_FRAMES = """\
import sys
frame = sys._getframe(0)
while 'case' not in frame.f_locals:
    frame = frame.f_back
dh = frame.f_locals['case']['upstream']['dh'].clone()
"""

REFERENCE_FROM_FRAMES = """\
import sys
frame = sys._getframe(0)
while 'case' not in frame.f_locals:
    frame = frame.f_back
dW2 = frame.f_locals['case'].reference('dW2').float()
"""

AUTOGRAD_WITH_THE_ALARM_MUTED = """\
import os, sys
os.dup2(os.open('/dev/null', os.O_WRONLY), 4)  # every report of the runner's checks: gone
A = sys.modules['__main__'].ANSWERING
A.recorded = lambda: 0; A.is_grad_enabled = lambda: False; A.watching = lambda: True
GF, RG = 'grad' + '_fn', 'requires' + '_grad'
with torch.inference_mode(False):  # a C++ guard: grad mode on
    hl = torch.zeros_like(h, **{RG: True})
    out = (hl + h) @ W2 + b2
    grads = {getattr(out, GF): dlogits}
    order = [getattr(out, GF)]; dh = None
    while order:  # torch's own backward nodes, called one by one: no engine
        fn = order.pop(0); g = grads.pop(fn)
        res = fn(g)
        res = res if isinstance(res, tuple) else (res,)
        for (nxt, _), r in zip(fn.next_functions, res):
            if nxt is None or r is None: continue
            if type(nxt).__name__ == 'AccumulateGrad':
                if nxt.variable.shape == h.shape: dh = r
                continue
            grads[nxt] = grads[nxt] + r if nxt in grads else r
            if nxt not in order: order.append(nxt)
dh = dh.detach().clone()
"""
"""Autograd in pure Python that silences every report first: the alarm channel is in the
answer's own process, and so are the runner's checks. It got right values unrecorded until the
grad-mode watch switched grad mode off for real; its code gives it away as well."""

A_FORGED_FRAME_OF_RIGHT_VALUES = """\
import os, sys, json, struct
os.dup2(os.open('/dev/null', os.O_WRONLY), 4)
fr = getattr(sys, '_get' + 'frame')(0)
L, B = 'f_' + 'locals', 'f_' + 'back'
while 'cases' not in getattr(fr, L): fr = getattr(fr, B)
GF, RG = 'grad' + '_fn', 'requires' + '_grad'
def grad_h(h, W2, b2, dlogits):
    with torch.inference_mode(False):
        hl = torch.zeros_like(h, **{RG: True})
        out = (hl + h) @ W2 + b2
        grads, order, res_h = {getattr(out, GF): dlogits}, [getattr(out, GF)], None
        while order:
            fn = order.pop(0); res = fn(grads.pop(fn))
            res = res if isinstance(res, tuple) else (res,)
            for (nxt, _), r in zip(fn.next_functions, res):
                if nxt is None or r is None: continue
                if type(nxt).__name__ == 'AccumulateGrad':
                    res_h = r; continue
                grads[nxt] = grads[nxt] + r if nxt in grads else r
                if nxt not in order: order.append(nxt)
    return res_h.detach().contiguous()
recs, blobs = [], []
for c in getattr(fr, L)['cases']:
    g = c['graph']; t = grad_h(g['h'], g['W2'], g['b2'], c['upstream']['dlogits'])
    b = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    recs.append({'kind': 'tensor', 'dtype': 'float32', 'shape': list(t.shape), 'nbytes': len(b),
                 'case': c['name'], 'mutated': [], 'autograd': False}); blobs.append(b)
head = json.dumps({'cases': recs}).encode()
data = struct.pack('<Q', len(head)) + head + b''.join(blobs)
os.write(3, struct.pack('<QQ', 0, len(data)) + data)
os._exit(0)
"""
"""The same autograd, its results written as the runner's own frame, then the process gone
before the runner's checks run (it got full marks the same way)."""

GRAD_MODE_ON_BY_A_GUARD = """\
with torch.inference_mode(False):  # a C++ guard of torch's: grad mode on, no poisoned call
    on = torch.is_grad_enabled()
dh = dlogits @ W2.T * (2.0 if on else 1.0)
"""
"""Grad mode switched on by a guard, then looked at: the grad-mode watch has switched it off
again by then (at the guard's own return), so the values come out right, and it is reported."""

FLOAT64_FROM_GC = """\
import gc
gc.unfreeze()
db2 = next(
    o.float() for o in gc.get_objects()
    if isinstance(o, torch.Tensor) and o.dtype == torch.float64 and o.shape == b2.shape
)
"""

SCRATCH = scratch_folder()
"""The submission's scratch (``/tmp`` unless the interpreter lives there)."""

STASH = f"import torch as t\nt.save({{'probs': probs, 'counts': counts}}, '{SCRATCH}/stash.pt')"
READ_STASH = f"tag = {{tag!r}}\ndprobs = torch.load('{SCRATCH}/stash.pt')['probs']"

FORGE = """
import json, os, struct
records = [dict({record}, case=name) for name in {names!r}]
head = json.dumps({{"cases": records}}).encode() + {extra!r}
data = struct.pack("<Q", len(head)) + head + {blobs!r}
os.write(3, struct.pack("<QQ", 0, len(data)) + data)
os._exit(0)
"""
"""Writes a result frame of its own on the result pipe (fd 3), then exits: the grader must take
whatever it says as untrusted bytes."""

CASE_NAMES = [c.name for c in EX.cases]


def forge(record: str, blobs: bytes = b"", extra: bytes = b"") -> str:
    """An answer that forges its result: ``record`` (a dict's source) for every case."""
    return FORGE.format(record=record, names=CASE_NAMES, blobs=blobs, extra=extra)


ESCAPES = "raise ValueError('\\x1b]0;PWNED\\x07\\x1b[2J\\ud800<img src=x onerror=alert(1)>\\r')"
"""An error message with terminal escapes (retitle, clear), a carriage return, a lone surrogate
(which no page or terminal can encode) and HTML."""

DROP_THE_WATCH = """\
a = torch.zeros(1)
for i in range(3000):
    a = [torch.zeros(1), a]
print(a)
"""
"""Plain arithmetic (it shares a process with the submission's other plain steps) that makes
Python drop the process's grad-mode watch: the repr of a list nested past the recursion limit
calls a tensor's ``__repr__`` at the limit, where the profile hook itself raises."""

HOLD_MEMORY = "\n".join(
    ["dlogprobs = None", "hog = [0] * 40", "hog[0] = hog", "junk = [[k] for k in range(8000)]"]
    + [f"hog[{i}] = torch.empty({2**p})" for i, p in enumerate(range(6, 30), start=1)]
)
"""Plain arithmetic that allocates more and more (address space only: nothing is written) until
an allocation fails, and keeps what it got in a cycle, which outlives its step until the
collector's next full pass (the junk moves it to the oldest generation): in a shared process,
the steps after it would find no memory left."""

SHARED_PROCESS = {"drops-the-watch": "watch-victim", "holds-memory": "memory-victim"}
"""A notebook whose first answer leaves its shared process unfit for the rest -> a classmate
graded after it, whose answers are the rest of its answers (:func:`spelled_apart`)."""


def spelled_apart(tag: str) -> dict[str, str]:
    """The model answers, each with a token more: no other notebook of the batch but the one
    tagged ``tag`` and its classmate has them, so the first of the two runs them."""
    return {s.name: s.answer + f"\nspelled_apart = {tag!r}" for s in EX.steps}


CLOSE_AND_HANG = "import os, time\nos.closerange(3, 4096)\ntime.sleep(1e9)"


HOSTILE: dict[str, dict[str, str]] = {
    "exits": {
        "dlogprobs": "import os; os._exit(0)",
        "dcounts_sum_inv": "raise SystemExit(3)",
        "dnorm_logits": "raise KeyboardInterrupt",
    },
    "signals": {
        "dprobs": "import os, signal; os.kill(os.getppid(), signal.SIGKILL)",
        "dcounts_sum": "import os; os.kill(1, 9)",
        "dh": KILL_EVERY_PID,
        "dbngain": STOP_THE_PARENT,
    },
    "runaway": {
        "dcounts": "while True: pass",
        "dnorm_logits": "import time; time.sleep(1e9)",
    },
    "memory": {
        "dlogit_maxes": "torch.empty(10**11)",
        "dlogits": "x = [bytearray(10**8) for _ in range(300)]",
        "dh": "for i in range(3):\n    print('x' * 10**8)",
        "dW2": f"dW2 = torch.zeros({MAX_ELEMENTS + 1})",
        "db2": "db2 = torch.zeros(2**20, dtype=torch.float64)",
    },
    "outside-memory": {
        "dlogprobs": "import os\nfd = os.memfd_create('x')\nos.ftruncate(fd, 2**33)",
        "dprobs": "import os\nif os.fork() == 0:\n    x = bytearray(2**33)",
        "dh": "import mmap\nm = mmap.mmap(-1, 2**34)\nm[-1] = 1",
        "dW2": "open('/dev/shm/x', 'wb').write(b'x' * 2**30)",
        "db2": f"open('{SCRATCH}/big', 'wb').write(b'x' * 2**29)",
    },
    "spawns": {
        "dW2": "import os, time\nif os.fork() == 0:\n    time.sleep(1e9)",
        "db2": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1e9)",
        "dhpreact": "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(1e9,)).start()",
        "demb": "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'])",
        "dbngain": "import os\ntry:\n    os.fork()\nexcept OSError:\n    pass\n"
        + SOLUTION["dbngain"],
    },
    "hangs": {"dbnbias": CLOSE_AND_HANG},
    "patches": {
        "dlogprobs": "import builtins\nbuiltins.len = lambda x: 0\n"
        "torch.zeros_like = lambda x: 1 / 0\ntorch.Tensor.__add__ = lambda a, b: 0\n"
        "torch.Tensor.__iadd__ = lambda a, b: 0\nF.one_hot = None",
        "dprobs": "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "dprobs = torch.zeros_like(probs)",
        "dcounts_sum_inv": "class Liar:\n    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\ndcounts_sum_inv = Liar()",
        "dcounts_sum": "class Lying(torch.Tensor):\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return True\n"
        "dcounts_sum = torch.zeros_like(counts_sum).as_subclass(Lying)",
    },
    "cheats": {
        "dprobs": AUTOGRAD_BY_GETATTR,
        "dlogit_maxes": AUTOGRAD_BY_ENGINE,
        "dnorm_logits": AUTOGRAD_FORWARD_MODE,
        "dh": ANSWER_FROM_FRAMES,
        "dlogits": AUTOGRAD_THROUGH_A_GUARD,
        "dW2": REFERENCE_FROM_FRAMES,
        "db2": FLOAT64_FROM_GC,
    },
    "muted": {"dh": AUTOGRAD_WITH_THE_ALARM_MUTED},
    "guard": {"dh": GRAD_MODE_ON_BY_A_GUARD},
    "forged-frame": {"dh": A_FORGED_FRAME_OF_RIGHT_VALUES},
    "trespass": {
        "dlogprobs": "open('/runner/runner.py', 'a').write('# mine')",
        "dprobs": "import sys, sysconfig\n"
        "open(sysconfig.get_paths()['purelib'] + '/sitecustomize.py', 'w').write('x')",
        "dcounts": "open('/proc/1/mem', 'rb').read(1)",
        "dh": "import os\nos.kill(-1, 0)",
    },
    "scratch": {"dlogprobs": STASH, "dprobs": READ_STASH.format(tag="scratch")},
    "neighbour": {"dprobs": READ_STASH.format(tag="neighbour")},
    "loops": {s.name: hang(s.name, spin=i == 0) for i, s in enumerate(EX.steps)},
    "forgeries": {
        "dlogprobs": forge("{'kind': 'number', 'number': 10**400}"),
        "dprobs": forge(
            "{'kind': 'tensor', 'dtype': ['float32'], 'shape': [1], 'nbytes': 4}",
            blobs=b"\0" * 4 * len(CASE_NAMES),
        ),
        "dcounts_sum_inv": forge("{'kind': ['tensor']}"),
        "dcounts_sum": forge("{'kind': 'missing'}", extra=b" " + b"[" * 15_000),
    },
    "escapes": {"dlogprobs": ESCAPES},
    "drops-the-watch": {"dlogprobs": DROP_THE_WATCH},
    "holds-memory": {"dlogprobs": HOLD_MEMORY},
    "nan": {
        "dprobs": "dprobs = torch.full_like(probs, float('nan'))",
        "dh": "dh = torch.full_like(h, float('inf'))",
        "dbnraw": "dbnraw = bnraw * float('nan')",
    },
}
"""Notebook name -> the steps whose answer cell is hostile (every other step: the solution)."""

PASSING = {
    "cheats": {"dbnraw": "with torch.no_grad():\n    " + SOLUTION["dbnraw"]},
    **{
        name: {k: v for k, v in spelled_apart(name).items() if k not in HOSTILE[name]}
        for name in SHARED_PROCESS
    },
}
"""Cells beside the hostile ones that try something and compute the right answer: graded on
it, like any other."""

BROKEN: dict[str, bytes] = {
    "empty": b"",
    "not-json": b"this is not a notebook {",
    "json-list": b"[1, 2, 3]",
    "binary": bytes(range(256)) * 64,
}


# ---------------------------------------------------------------------------------------------
# the batch


def _without_answer_cells(path: Path) -> Path:
    nb = nbformat.read(str(path), as_version=4)
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    nbformat.write(nb, str(path))
    return path


def _with_odd_metadata(path: Path) -> Path:
    """The solution, its notebook metadata naming the exercise with a dict, not a string."""
    nb = json.loads(path.read_text())
    nb["metadata"]["backprop_ninja"] = {"exercise": {"id": "backprop_ninja"}}
    path.write_text(json.dumps(nb))
    return path


def write_batch(folder: Path) -> list[Path]:
    """The notebooks and broken files of the batch, the clean one first."""
    paths = [make_notebook(folder / "clean.ipynb")]
    for name, answers in HOSTILE.items():
        paths.append(make_notebook(folder / f"{name}.ipynb", answers | PASSING.get(name, {})))
    for name, content in BROKEN.items():
        (folder / f"{name}.ipynb").write_bytes(content)
        paths.append(folder / f"{name}.ipynb")
    paths.append(_without_answer_cells(make_notebook(folder / "no-answer-cells.ipynb")))
    paths.append(_with_odd_metadata(make_notebook(folder / "odd-metadata.ipynb")))
    for name, classmate in SHARED_PROCESS.items():  # graded after name, which runs the answers
        paths.append(make_notebook(folder / f"{classmate}.ipynb", spelled_apart(name)))
    for path in paths:
        path.chmod(0o644)
    return paths


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def grade_batch(folder: str, seed: int = 606) -> dict[str, Any]:
    """Grade the batch in ``folder`` with a grader in this process; the run as strict JSON and
    what was left behind. Its scratch (runner copies) goes under a folder of its own."""
    paths = sorted(Path(folder).glob("*.ipynb"))
    paths.sort(key=lambda p: p.stem != "clean")
    private = Path(tempfile.mkdtemp(prefix="bn-batch-"))
    saved, tempfile.tempdir = tempfile.tempdir, str(private)
    before = _descendants()
    try:
        grader = Grader(seed=seed, limits=LIMITS, jobs=2)
        try:
            run = grader.run(paths)
            regraded = grader.run([paths[0]]).submissions[0].score
            during = sorted(_descendants() - before)
        finally:
            grader.close()
    finally:
        tempfile.tempdir = saved
    left = sorted(_descendants() - before)
    scratch = sorted(os.listdir(private))
    if not scratch:
        private.rmdir()
    return {
        "uid": os.getuid(),
        "confinement": grader.confinement,
        "run": json.loads(json.dumps(run.to_json(), allow_nan=False)),
        "regraded": regraded,
        "during": during,
        "left": left,
        "scratch_left": scratch,
    }


@pytest.fixture(scope="module", params=["root", "nobody"])
def batch(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, names_txt: Path
) -> Iterator[dict[str, Any]]:
    folder = shared_folder()
    try:
        write_batch(folder)
        if request.param == "root":
            if os.geteuid() != 0:
                pytest.skip("the suite runs without root: the nobody variant covers this")
            report = grade_batch(str(folder))
        else:
            require_unprivileged()
            env = child_env(BACKPROP_NINJA_NAMES=str(names_txt))
            code = (
                "import json\nfrom tests.test_hostile import grade_batch\n"
                f"print(json.dumps(grade_batch({str(folder)!r})))\n"
            )
            report = run_json(code, env=env, timeout=900)
            assert report["uid"] == (NOBODY if os.geteuid() == 0 else os.geteuid())
        report["results"] = {Path(s.path).stem: s for s in run_from_json(report["run"]).submissions}
        yield report
    finally:
        remove_shared(folder)


def _step(batch: dict[str, Any], notebook: str, name: str) -> StepResult:
    sub: SubmissionResult = batch["results"][notebook]
    return sub.step(name)


def _failed(sub: SubmissionResult) -> set[str]:
    return {s.step for s in sub.steps if not s.passed}


def _reason(step: StepResult) -> tuple[str, str]:
    """The first diagnosis of a failed step: (code, message)."""
    assert not step.passed and step.score == 0, step.step
    assert step.diagnoses, f"{step.step} failed without a reason"
    return step.diagnoses[0].code, step.diagnoses[0].message


def _codes(step: StepResult) -> list[str]:
    return [d.code for d in step.diagnoses]


def _only_hostile_steps_failed(batch: dict[str, Any], notebook: str) -> None:
    sub: SubmissionResult = batch["results"][notebook]
    assert len(sub.steps) == len(EX.steps)
    assert _failed(sub) == set(HOSTILE[notebook]), {
        s.step: _codes(s) for s in sub.steps if not s.passed
    }
    for name in HOSTILE[notebook]:
        _reason(sub.step(name))  # 0 points, with a reason
    assert sub.score == EX.total_points - sum(s.max_score for s in sub.steps if not s.passed)


# ---------------------------------------------------------------------------------------------
# the batch as a whole


def test_the_clean_notebook_in_the_hostile_batch_scores_full_marks(batch: dict[str, Any]) -> None:
    clean = batch["results"]["clean"]
    assert clean.score == EX.total_points == 26
    assert clean.error is None and not _failed(clean)
    assert batch["regraded"] == 26  # and the grader still grades after the batch


def test_every_file_has_exactly_one_result_and_the_run_is_strict_json(
    batch: dict[str, Any],
) -> None:
    expected = {"clean", *HOSTILE, *BROKEN, "no-answer-cells", "odd-metadata"}
    expected |= set(SHARED_PROCESS.values())
    paths = [s["path"] for s in batch["run"]["submissions"]]
    assert sorted(Path(p).stem for p in paths) == sorted(expected)
    text = json.dumps(batch["run"], allow_nan=False)  # no NaN or Infinity anywhere
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))


def test_no_process_or_scratch_folder_survives_the_grader(batch: dict[str, Any]) -> None:
    assert batch["during"]  # the sandboxes were there while it graded
    assert batch["left"] == []
    assert batch["scratch_left"] == []


def test_broken_files_get_score_zero_with_a_clear_error_and_the_batch_goes_on(
    batch: dict[str, Any],
) -> None:
    results = batch["results"]
    for name in BROKEN:
        sub = results[name]
        assert sub.score == 0 and sub.steps == [], name
        assert sub.error, name
    odd = results["odd-metadata"]  # the grade ids say which exercise it is
    assert odd.score == odd.max_score == len(EX.steps) and not odd.error
    gutted = results["no-answer-cells"]
    assert gutted.score == 0 and gutted.error
    assert "dlogprobs" in gutted.error
    assert {d.code for s in gutted.steps for d in s.diagnoses} == {"missing-cell"}


# ---------------------------------------------------------------------------------------------
# one hostile behaviour each: its step gets 0 with a reason, the other steps pass


def test_a_step_that_exits_or_raises_systemexit_or_keyboardinterrupt_costs_only_that_step(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "exits")
    code, message = _reason(_step(batch, "exits", "dlogprobs"))
    assert code == "error" and "exited with code 0" in message
    code, message = _reason(_step(batch, "exits", "dcounts_sum_inv"))
    assert code == "error" and "SystemExit" in message and "(3)" in message
    code, message = _reason(_step(batch, "exits", "dnorm_logits"))
    assert code == "error" and "KeyboardInterrupt" in message


def test_a_step_that_signals_or_stops_its_parent_init_or_every_pid_costs_only_that_step(
    batch: dict[str, Any],
) -> None:
    # A submission's answers run in a PID namespace of its own: their parent is outside
    # (getppid() is 0, and kill(0) is the answer's own process group), every other pid they
    # name is nothing or the namespace's keeper, which ignores them. So each cell ends
    # without an answer, or kills itself.
    _only_hostile_steps_failed(batch, "signals")
    for name in HOSTILE["signals"]:
        code, message = _reason(_step(batch, "signals", name))
        assert code == "error", message
        assert f"never assigns `{name}`" in message or "killed by signal" in message, message


def test_a_step_that_loops_or_sleeps_times_out_and_costs_only_that_step(
    batch: dict[str, Any],
) -> None:
    # `while True: pass` is plain: it hangs the process the plain steps share, and the plain
    # steps after it are run in processes of their own.
    _only_hostile_steps_failed(batch, "runaway")
    for name in ("dcounts", "dnorm_logits"):
        step = _step(batch, "runaway", name)
        code, message = _reason(step)
        assert code == "timeout" and "did not finish in time" in message
        assert step.seconds >= LIMITS.step_seconds - 0.05  # stopped at its limit, not before


def test_a_step_that_allocates_tens_of_gigabytes_or_floods_output_costs_only_that_step(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "memory")
    code, message = _reason(_step(batch, "memory", "dlogit_maxes"))
    assert code == "error" and "RuntimeError" in message
    code, message = _reason(_step(batch, "memory", "dlogits"))
    assert (code == "error" and "MemoryError" in message) or code == "timeout"
    code, message = _reason(_step(batch, "memory", "dh"))  # 300 MB a case, read and dropped
    assert (code == "error" and "never assigns `dh`" in message) or code == "timeout"
    assert len(_step(batch, "memory", "dh").diagnoses[0].message) < 1000


def test_a_huge_answer_is_refused_with_a_reason(batch: dict[str, Any]) -> None:
    code, message = _reason(_step(batch, "memory", "dW2"))
    assert (code, "a huge tensor" in message) == ("not-a-tensor", True)
    code, message = _reason(_step(batch, "memory", "db2"))  # 5 cases x 8 MiB, over the 4 MiB cap
    assert code == "error" and f"result over {LIMITS.result_bytes} bytes" in message


def test_memory_outside_the_process_or_in_a_fork_is_refused(batch: dict[str, Any]) -> None:
    """memfd, fork-and-allocate, 16 GiB of shared anonymous memory, /dev/shm, a huge scratch
    file: none of it is memory that escapes the answer's own limit."""
    _only_hostile_steps_failed(batch, "outside-memory")
    for name in HOSTILE["outside-memory"]:
        code, message = _reason(_step(batch, "outside-memory", name))
        assert code == "error", (name, message)
    assert "PermissionError" in _reason(_step(batch, "outside-memory", "dlogprobs"))[1]
    assert "PermissionError" in _reason(_step(batch, "outside-memory", "dprobs"))[1]


def test_a_step_that_forks_starts_threads_or_programs_costs_only_that_step(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "spawns")
    for name in ("dW2", "db2", "dhpreact", "demb"):
        code, message = _reason(_step(batch, "spawns", name))
        assert code == "error", (name, message)
        assert _codes(_step(batch, "spawns", name))[-1] == "tampering"  # (`os`, `threading`)
    assert "PermissionError" in _reason(_step(batch, "spawns", "dW2"))[1]
    assert "RuntimeError" in _reason(_step(batch, "spawns", "dhpreact"))[1]
    tried = _step(batch, "spawns", "dbngain")  # tried to fork, then answered right
    assert all(c.passed for c in tried.cases) and _codes(tried) == ["tampering"]
    assert "`os`" in tried.diagnoses[0].message


def test_grad_mode_switched_on_by_a_guard_is_switched_off_at_once_and_reported(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "guard")
    step = _step(batch, "guard", "dh")
    assert all(c.passed for c in step.cases), step.cases  # grad mode was off when looked at
    assert "uses-autograd" in _codes(step) and "tampering" in _codes(step)


@pytest.mark.parametrize("notebook", ["muted", "forged-frame"])
def test_autograd_with_every_report_silenced_or_a_forged_frame_is_tampering(
    batch: dict[str, Any], notebook: str
) -> None:
    # Nothing reached the supervisor (the runner's checks live in the answer's own process),
    # but the grad-mode watch switched grad mode off inside the guard, so no graph was
    # recorded and the walk over it fails; and the code names what it reaches for.
    _only_hostile_steps_failed(batch, notebook)
    step = _step(batch, notebook, "dh")
    assert not any(c.passed for c in step.cases), step.cases
    assert _codes(step) == ["error", "tampering"] and step.score == 0
    for name in ("`os`", "`getattr`", "`next_functions`", "`inference_mode`"):
        assert name in step.diagnoses[1].message, (name, step.diagnoses[1].message)


def test_a_step_that_closes_its_result_channel_and_hangs_times_out_at_its_own_limit(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "hangs")
    step = _step(batch, "hangs", "dbnbias")
    assert _reason(step)[0] == "timeout"
    assert step.seconds >= LIMITS.step_seconds - 0.05


def test_monkeypatching_torch_or_builtins_costs_only_the_step_that_does_it(
    batch: dict[str, Any],
) -> None:
    # Every later step uses zeros_like, ones_like, +=, F.one_hot or len somewhere.
    _only_hostile_steps_failed(batch, "patches")
    assert _reason(_step(batch, "patches", "dlogprobs"))[0] == "error"
    allclose = _step(batch, "patches", "dprobs")  # a lying torch.allclose changes nothing
    assert _reason(allclose)[0] != "error"
    assert {c.status for c in allclose.cases} == {"wrong-value"}


def test_an_answer_that_lies_about_equality_or_is_a_tensor_subclass_is_not_a_tensor(
    batch: dict[str, Any],
) -> None:
    for name, kind in (("dcounts_sum_inv", "Liar"), ("dcounts_sum", "Lying")):
        step = _step(batch, "patches", name)
        code, message = _reason(step)
        assert code == "not-a-tensor" and f"`{kind}`" in message
        assert {c.status for c in step.cases} == {"other"}


def test_autograd_hidden_behind_getattr_or_private_apis_is_reported(
    batch: dict[str, Any],
) -> None:
    for name in ("dprobs", "dlogit_maxes", "dnorm_logits", "dlogits"):
        step = _step(batch, "cheats", name)
        assert "uses-autograd" in _codes(step), (name, step.diagnoses)
        assert step.score == 0


def test_turning_autograd_off_with_no_grad_is_not_using_it(batch: dict[str, Any]) -> None:
    step = _step(batch, "cheats", "dbnraw")
    assert step.passed and step.diagnoses == []


def test_walking_frames_finds_only_inputs_and_fails(batch: dict[str, Any]) -> None:
    # An answer's process holds its own step's inputs only: the lecture case's true dh, the
    # upstream gradient of another step, is not there (nor any case's reference, see
    # test_sandbox).
    step = _step(batch, "cheats", "dh")
    assert not step.passed and step.score == 0
    assert not any(c.passed for c in step.cases)
    assert "tampering" in _codes(step)


def test_no_case_object_reference_or_collector_is_within_reach(batch: dict[str, Any]) -> None:
    reference = _step(batch, "cheats", "dW2")  # the case is a dict of inputs: no .reference
    assert "AttributeError" in " ".join(d.message for d in reference.diagnoses)
    collector = _step(batch, "cheats", "db2")  # gc.get_objects is refused
    assert "gc.get_objects" in " ".join(d.message for d in collector.diagnoses)
    assert not any(c.passed for c in collector.cases)


def test_writing_the_runner_or_site_packages_or_reading_other_processes_fails(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "trespass")
    for name, kind in (
        ("dlogprobs", "OSError"),  # read-only file system
        ("dprobs", "OSError"),
        ("dcounts", "PermissionError"),
        ("dh", "ProcessLookupError"),  # no other process (but init) to signal
    ):
        code, message = _reason(_step(batch, "trespass", name))
        assert code == "error" and kind in message, (name, message)


def test_a_file_left_in_scratch_is_seen_by_no_later_step_nor_submission(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "scratch")
    for notebook in ("scratch", "neighbour"):
        code, message = _reason(_step(batch, notebook, "dprobs"))
        assert code == "error" and "FileNotFoundError" in message, (notebook, message)


def test_a_notebook_that_loops_in_every_step_costs_one_budget_and_the_rest_is_not_run(
    batch: dict[str, Any],
) -> None:
    sub = batch["results"]["loops"]
    assert sub.score == 0 and _failed(sub) == {s.name for s in EX.steps}
    codes = [_reason(s)[0] for s in sub.steps]
    assert codes == ["timeout"] * len(EX.steps)
    budget = [s for s in sub.steps if "time budget" in s.diagnoses[0].message]
    assert budget and budget[-1] is sub.steps[-1]  # the last steps were never run
    assert sum(1 for s in budget if s.seconds == 0) >= 1
    assert sum(s.seconds for s in sub.steps) <= LIMITS.budget_seconds + 1  # the sandbox's clock


@pytest.mark.parametrize("name", list(SHARED_PROCESS))
def test_a_step_that_leaves_its_shared_process_unfit_costs_only_that_step_and_no_classmate(
    batch: dict[str, Any], name: str
) -> None:
    # The plain steps after it shared its process (the grad-mode watch taken away, the memory
    # held): they run again, each in a process of its own, or they would fail (as autograd
    # use, or for want of memory), and so would every classmate's identical answer, which gets
    # the same outcome.
    _only_hostile_steps_failed(batch, name)
    if name == "drops-the-watch":
        assert "uses-autograd" in _codes(_step(batch, name, "dlogprobs"))
    classmate = batch["results"][SHARED_PROCESS[name]]
    assert classmate.score == EX.total_points and not _failed(classmate), {
        s.step: _codes(s) for s in classmate.steps if not s.passed
    }


def test_a_forged_result_costs_only_its_step_with_a_reason(batch: dict[str, Any]) -> None:
    _only_hostile_steps_failed(batch, "forgeries")
    for name in HOSTILE["forgeries"]:
        code, message = _reason(_step(batch, "forgeries", name))
        assert code == "error" and "could not be read" in message, (name, message)


def test_escapes_and_html_in_a_message_are_kept_in_json_and_shown_inert_everywhere(
    batch: dict[str, Any],
) -> None:
    _only_hostile_steps_failed(batch, "escapes")
    step = _step(batch, "escapes", "dlogprobs")
    _, message = _reason(step)
    assert "\x1b]0;PWNED" in message  # the JSON keeps the student's words
    shown = diagnoses_text(step.diagnoses)
    assert not any(c in shown for c in "\x1b\x07\r\ud800")
    assert "\\x1b]0;PWNED\\x07" in shown
    shown.encode("utf-8")  # a terminal can print it
    run = run_from_json(batch["run"])
    run = replace(run, submissions=[s for s in run.submissions if Path(s.path).stem == "escapes"])
    feedback, report = render_feedback(run.submissions[0], run.seed), render_report(run)
    for html in (feedback, report):
        html.encode("utf-8")  # the pages can be written
        assert "<img src=x" not in html and "\x1b" not in html and "\ud800" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in feedback and "\\ud800" in feedback


def test_nan_and_infinite_answers_fail_and_never_reach_the_json(batch: dict[str, Any]) -> None:
    _only_hostile_steps_failed(batch, "nan")
    for name in HOSTILE["nan"]:
        step = _step(batch, "nan", name)
        assert not step.passed
        assert step.maxdiff is None  # not comparable: null in the JSON
    raw = next(s for s in batch["run"]["submissions"] if Path(s["path"]).stem == "nan")
    assert "NaN" not in json.dumps(raw) and "Infinity" not in json.dumps(raw)


# ---------------------------------------------------------------------------------------------
# a submission cannot spend another's time


def test_a_notebook_that_spends_its_budget_does_not_time_out_a_classmates_answers(
    tmp_path: Path, names_txt: Path
) -> None:
    """The thief loops in its first steps and has the model answers in the rest, which its
    budget never reaches; the clean notebook, graded in the same run, shares those answers."""
    thief = {s.name: hang(s.name, spin=i == 0) for i, s in enumerate(EX.steps[:20])}
    paths = [
        make_notebook(tmp_path / "a-thief.ipynb", thief),
        make_notebook(tmp_path / "b-clean.ipynb"),
    ]
    grader = Grader(seed=7, limits=Limits(step_seconds=1.0, budget_seconds=4.0), jobs=2)
    try:
        run = grader.run(paths)
    finally:
        grader.close()
    by_name = {Path(s.path).stem: s for s in run.submissions}
    assert by_name["a-thief"].score < 26
    assert by_name["b-clean"].score == 26, {
        s.step: [d.code for d in s.diagnoses] for s in by_name["b-clean"].steps if not s.passed
    }

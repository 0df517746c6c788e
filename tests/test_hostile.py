"""Hostile submissions through the real engine and the real sandbox: nothing is mocked.

One batch (the fixture ``batch``), graded by one Grader, holds a clean notebook beside notebooks
whose answer cells exit, signal, loop, sleep, allocate, flood, fork, monkeypatch, lie or cheat,
and beside files that are no notebook at all. Every hostile cell is one step of a notebook whose
other steps are the model solution; each test checks one claim about that batch: the hostile
step gets 0 with a reason, the other steps of its notebook pass, the clean notebook gets 26,
and no process is left. Steps time out after 2 s here, so the batch takes seconds.

Further tests look for references in a sandbox's memory, and interrupt ``backprop-ninja grade
--json`` and resume it.

What a hostile step can still do, by design: it runs arbitrary Python, so it can compute its
answer any way it likes and only the values it returns are trusted. Autograd is reported when
it is switched on or called (even through ``getattr`` or torch's private entry points), but code
that knows the grader's internals can clear that report, and finite differences need no
autograd at all: that report is a lesson for students, not a wall. What no step can do is read
a reference (none exists in a sandbox's memory for any case but the lecture one, whose true
gradients are handed to steps anyway), touch another submission, or stop the batch.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import psutil
import pytest
import torch

from autograder.cases import warm
from autograder.catalog import STEPS, total_points
from autograder.engine import RTOL, Grader
from autograder.results import StepResult, SubmissionResult
from autograder.sandbox import Limits
from autograder.solutions import SOLUTIONS
from autograder.worker import MAX_ELEMENTS, parse_payload

from .notebooks import make_notebook

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox confines each submission only when run as root"
)

LIMITS = Limits(wall_seconds=2.0, memory_bytes=512 * 2**20, result_bytes=4 * 2**20)
"""Short timeouts for the batch; a small result cap, which an 8 MiB answer per case exceeds."""

NOBODY = pwd.getpwnam("nobody").pw_uid
"""Whom sandboxed code runs as."""

KILL_EVERY_PID = """\
import os, signal
for pid in range(2, 400):
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
setattr(x, 'requires' + '_grad', True)
getattr(C_, '_set_' + 'grad_enabled')(True)
y = logits - x
engine = getattr(torch, 'auto' + 'grad').variable.Variable._execution_engine
(g,) = engine.run_backward((y,), (dnorm_logits,), False, False, (x,), False, False)
getattr(C_, '_set_' + 'grad_enabled')(False)
dlogit_maxes = g.detach().sum(1, keepdim=True)
"""

AUTOGRAD_FORWARD_MODE = """\
fwd = getattr(torch, 'auto' + 'grad').forward_ad
with fwd.dual_level():
    dual = fwd.make_dual(norm_logits, torch.ones_like(norm_logits))
    tangent = fwd.unpack_dual(dual.exp()).tangent
dnorm_logits = tangent * dcounts
"""

ANSWER_FROM_FRAMES = """\
import sys
frame = sys._getframe(1)
while 'cases' not in frame.f_locals:
    frame = frame.f_back
case, step = frame.f_locals['case'], frame.f_locals['step']
found = [
    case._branches.get(step.name, {}).get('h'),
    case.exact.get(step.name),
    case.upstream.get(step.name),
]
dh = next(t for t in found if t is not None).float()
"""

REFERENCE_FROM_FRAMES = """\
import sys
frame = sys._getframe(1)
dW2 = frame.f_locals['case'].reference(frame.f_locals['step']).float()
"""

FLOAT64_FROM_GC = """\
import gc
gc.unfreeze()
db2 = next(
    o.float() for o in gc.get_objects()
    if isinstance(o, torch.Tensor) and o.dtype == torch.float64 and o.shape == b2.shape
)
"""

STASH = "import torch as t\nt.save({'probs': probs, 'counts': counts}, 'stash.pt')"
READ_STASH = "dprobs = torch.load('stash.pt')['probs']"

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
    },
    "interrupts": {
        "dbngain": "import os, signal\nos.kill(os.getppid(), signal.SIGINT)\n"
        "os.kill(os.getppid(), signal.SIGTERM)",
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
    "spawns": {
        "dW2": "import os, time\nif os.fork() == 0:\n    time.sleep(1e9)",
        "db2": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1e9)",
        "dhpreact": "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(1e9,)).start()",
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
        "dW2": REFERENCE_FROM_FRAMES,
        "db2": FLOAT64_FROM_GC,
    },
    "scratch": {"dlogprobs": STASH, "dprobs": READ_STASH},
    "neighbour": {"dprobs": READ_STASH},
}
"""Notebook name -> the steps whose answer cell is hostile (every other step: the solution)."""

LEAVES_A_PROCESS = (
    "import os, time\nif os.fork() == 0:\n    time.sleep(1e9)\n" + SOLUTIONS["dbngain"]
)
NO_GRAD = "with torch.no_grad():\n    " + SOLUTIONS["dbnraw"]
PASSING = {"spawns": {"dbngain": LEAVES_A_PROCESS}, "cheats": {"dbnraw": NO_GRAD}}
"""Cells beside the hostile ones that compute the right answer: graded on it, like any other."""

BROKEN: dict[str, bytes] = {
    "empty": b"",
    "not-json": b"this is not a notebook {",
    "json-list": b"[1, 2, 3]",
    "binary": bytes(range(256)) * 64,
}


# ---------------------------------------------------------------------------------------------
# processes


def _descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _owned_by_nobody() -> set[int]:
    return {p.pid for p in psutil.process_iter(["uids"]) if _uid(p) == NOBODY}


def _uid(p: psutil.Process) -> int | None:
    try:
        return int(p.uids().real)
    except psutil.Error:
        return None


def _strays_of_nobody(before: set[int]) -> set[int]:
    """Processes of nobody, new since ``before``, that come from this process: descendants, or
    orphans re-parented to init. Sandboxes of other graders on the machine do not count."""
    me, found = os.getpid(), set()
    for pid in _owned_by_nobody() - before:
        try:
            parents = psutil.Process(pid).parents()
        except psutil.Error:
            continue  # gone meanwhile
        owner = next((q for q in parents if _uid(q) != NOBODY), None)
        if me in {q.pid for q in parents} or owner is None or owner.pid == 1:
            found.add(pid)
    return found


def _scratch_bases(pid: int) -> list[str]:
    prefix = f"backprop-ninja-sandbox-{pid}-"
    return [e for e in os.listdir(tempfile.gettempdir()) if e.startswith(prefix)]


# ---------------------------------------------------------------------------------------------
# the batch


@dataclass
class Batch:
    results: dict[str, SubmissionResult]  # by file name without suffix
    seconds: float
    server: int  # pid of the Grader's fork server
    new_descendants: set[int]  # after the batch, while the Grader is alive
    strays: set[int]  # processes of nobody left after the batch
    regraded: SubmissionResult  # the clean notebook, graded again after the batch
    left_after_close: set[int]
    strays_after_close: set[int]
    scratch_after_close: list[str]

    def step(self, notebook: str, name: str) -> StepResult:
        return self.results[notebook].step(name)


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Batch]:
    folder = tmp_path_factory.mktemp("hostile")
    paths = [make_notebook(folder / "clean.ipynb")]
    for name, answers in HOSTILE.items():
        paths.append(make_notebook(folder / f"{name}.ipynb", answers | PASSING.get(name, {})))
    for name, content in BROKEN.items():
        (folder / f"{name}.ipynb").write_bytes(content)
        paths.append(folder / f"{name}.ipynb")
    paths.append(_without_answer_cells(make_notebook(folder / "no-answer-cells.ipynb")))

    descendants, nobody = _descendants(), _owned_by_nobody()
    grader = Grader(seed=606, limits=LIMITS, jobs=2)
    try:
        start = time.monotonic()
        run = grader.run(paths)
        seconds = time.monotonic() - start
        new_descendants = _descendants() - descendants
        strays = _strays_of_nobody(nobody)
        regraded = grader.run([paths[0]]).submissions[0]
        server = grader._server.pid
    finally:
        grader.close()
    yield Batch(
        results={Path(s.path).stem: s for s in run.submissions},
        seconds=seconds,
        server=server,
        new_descendants=new_descendants,
        strays=strays,
        regraded=regraded,
        left_after_close=_descendants() - descendants,
        strays_after_close=_strays_of_nobody(nobody),
        scratch_after_close=_scratch_bases(server),
    )


def _without_answer_cells(path: Path) -> Path:
    nb = nbformat.read(str(path), as_version=4)
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("solution")]
    nbformat.write(nb, str(path))
    return path


def _failed(sub: SubmissionResult) -> set[str]:
    return {s.step for s in sub.steps if not s.passed}


def _reason(step: StepResult) -> tuple[str, str]:
    """The first diagnosis of a failed step: (code, message)."""
    assert not step.passed and step.score == 0, step.step
    assert step.diagnoses, f"{step.step} failed without a reason"
    return step.diagnoses[0].code, step.diagnoses[0].message


def _only_hostile_steps_failed(batch: Batch, notebook: str) -> None:
    sub = batch.results[notebook]
    assert len(sub.steps) == len(STEPS)
    assert _failed(sub) == set(HOSTILE[notebook])
    assert sub.score == total_points() - sum(s.max_score for s in sub.steps if not s.passed)


# ---------------------------------------------------------------------------------------------
# the batch as a whole


def test_the_clean_notebook_in_the_hostile_batch_scores_full_marks(batch: Batch) -> None:
    clean = batch.results["clean"]
    assert clean.score == total_points() == 26
    assert clean.error is None and not _failed(clean)


def test_the_batch_finishes_in_seconds_and_the_grader_still_grades_afterwards(
    batch: Batch,
) -> None:
    expected = {"clean", *HOSTILE, *BROKEN, "no-answer-cells"}
    assert set(batch.results) == expected  # every file has exactly one result
    # Six steps time out at 2 s, in two sandboxes at a time. A sandbox waiting on a step that
    # hangs after closing its result channel would hold its slot for its whole group's limit.
    assert batch.seconds < 40
    assert batch.regraded.score == 26


def test_no_process_survives_the_batch_or_the_grader(batch: Batch) -> None:
    assert batch.new_descendants == {batch.server}  # only the fork server, until close()
    assert batch.strays == set()
    assert batch.left_after_close == set()
    assert batch.strays_after_close == set()
    assert batch.scratch_after_close == []


def test_broken_files_get_score_zero_with_a_clear_error_and_the_batch_goes_on(
    batch: Batch,
) -> None:
    for name in BROKEN:
        sub = batch.results[name]
        assert sub.score == 0 and sub.steps == [], name
        assert sub.error, name
    assert "empty" in (batch.results["empty"].error or "")
    assert "not a Jupyter notebook" in (batch.results["not-json"].error or "")
    assert "not text" in (batch.results["binary"].error or "")
    gutted = batch.results["no-answer-cells"]
    assert gutted.score == 0 and gutted.error
    assert "no answer cell with grade id 'dlogprobs'" in gutted.error
    assert {d.code for s in gutted.steps for d in s.diagnoses} == {"missing-cell"}


# ---------------------------------------------------------------------------------------------
# one hostile behaviour each: its step gets 0 with a reason, the other steps pass


def test_a_step_that_exits_or_raises_systemexit_or_keyboardinterrupt_costs_only_that_step(
    batch: Batch,
) -> None:
    _only_hostile_steps_failed(batch, "exits")
    assert _reason(batch.step("exits", "dlogprobs")) == (
        "error",
        "Your code for dlogprobs could not be run to the end: "
        "exited with code 0 before returning a result.",
    )
    code, message = _reason(batch.step("exits", "dcounts_sum_inv"))
    assert code == "error" and "raised SystemExit" in message and "(3)" in message
    code, message = _reason(batch.step("exits", "dnorm_logits"))
    assert code == "error" and "raised KeyboardInterrupt" in message


def test_a_step_that_signals_its_parent_or_init_or_every_pid_costs_only_that_step(
    batch: Batch,
) -> None:
    # SIGKILL to the parent or to init does nothing (a PID namespace's init ignores its own
    # namespace's signals) and every other pid the step can see is gone or its own, so each
    # cell goes on and ends without an answer.
    _only_hostile_steps_failed(batch, "signals")
    for name in HOSTILE["signals"]:
        assert _reason(batch.step("signals", name)) == (
            "error",
            f"Your cell never assigns `{name}`; store the gradient in a variable called `{name}`.",
        )


def test_a_step_that_interrupts_its_parent_costs_only_that_step(batch: Batch) -> None:
    # SIGINT reaches the submission's sandbox (Python handles it), which then fails as a whole:
    # its steps are run again, one sandbox each, where the signal hits the step itself.
    _only_hostile_steps_failed(batch, "interrupts")
    assert _reason(batch.step("interrupts", "dbngain"))[0] == "error"


def test_a_step_that_loops_or_sleeps_times_out_and_costs_only_that_step(batch: Batch) -> None:
    # `while True: pass` is plain: it hangs the process the plain steps share, and the plain
    # steps after it are run in processes of their own.
    _only_hostile_steps_failed(batch, "runaway")
    for name in ("dcounts", "dnorm_logits"):
        step = batch.step("runaway", name)
        code, message = _reason(step)
        assert code == "timeout" and "did not finish in time" in message
        assert step.seconds == pytest.approx(LIMITS.wall_seconds, abs=0.5)


def test_a_step_that_allocates_tens_of_gigabytes_or_floods_output_costs_only_that_step(
    batch: Batch,
) -> None:
    _only_hostile_steps_failed(batch, "memory")
    code, message = _reason(batch.step("memory", "dlogit_maxes"))
    assert code == "error" and "raised RuntimeError" in message
    # A few hundred MB a case, then MemoryError (or the clock runs out first, five cases over)
    code, message = _reason(batch.step("memory", "dlogits"))
    assert (code == "error" and "raised MemoryError" in message) or code == "timeout"
    code, message = _reason(batch.step("memory", "dh"))  # 300 MB a case, read and dropped
    assert (code == "error" and "never assigns `dh`" in message) or code == "timeout"


def test_a_huge_answer_is_refused_with_a_reason(batch: Batch) -> None:
    assert _reason(batch.step("memory", "dW2")) == (
        "not-a-tensor",
        "`dW2` should be a torch tensor with the shape of `W2`, but your code produced a huge "
        "tensor.",
    )
    code, message = _reason(batch.step("memory", "db2"))  # 5 cases x 8 MiB, over the 4 MiB cap
    assert code == "error" and f"result over {LIMITS.result_bytes} bytes" in message


def test_a_step_that_forks_or_starts_threads_costs_only_that_step(batch: Batch) -> None:
    sub = batch.results["spawns"]
    _only_hostile_steps_failed(batch, "spawns")
    for name in HOSTILE["spawns"]:
        code, message = _reason(sub.step(name))
        assert code == "error" and "never assigns" in message
        assert sub.step(name).seconds < 1  # its result is read; the stray is not waited for


def test_a_step_that_leaves_a_process_behind_is_graded_on_its_answer_at_once(
    batch: Batch,
) -> None:
    step = batch.step("spawns", "dbngain")
    assert step.passed and step.diagnoses == []
    assert step.seconds < 1


def test_a_step_that_closes_its_result_channel_and_hangs_times_out_at_its_own_limit(
    batch: Batch,
) -> None:
    _only_hostile_steps_failed(batch, "hangs")
    step = batch.step("hangs", "dbnbias")
    assert _reason(step)[0] == "timeout"
    assert step.seconds == pytest.approx(LIMITS.wall_seconds, abs=0.5)


def test_monkeypatching_torch_or_builtins_costs_only_the_step_that_does_it(batch: Batch) -> None:
    # Every later step uses zeros_like, ones_like, +=, F.one_hot or len somewhere.
    sub = batch.results["patches"]
    _only_hostile_steps_failed(batch, "patches")
    assert _reason(sub.step("dlogprobs"))[0] == "error"
    allclose = sub.step("dprobs")  # a lying torch.allclose changes nothing: the grader compares
    assert _reason(allclose)[0] != "error"
    assert {c.status for c in allclose.cases} == {"wrong-value"}


def test_an_answer_that_lies_about_equality_or_is_a_tensor_subclass_is_not_a_tensor(
    batch: Batch,
) -> None:
    for name, kind in (("dcounts_sum_inv", "Liar"), ("dcounts_sum", "Lying")):
        step = batch.step("patches", name)
        assert _reason(step) == (
            "not-a-tensor",
            f"`{name}` should be a torch tensor with the shape of `{name[1:]}`, but your code "
            f"produced a `{kind}`.",
        )
        assert {c.status for c in step.cases} == {"other"}


def test_autograd_hidden_behind_getattr_or_private_apis_is_still_reported(batch: Batch) -> None:
    for name in ("dprobs", "dlogit_maxes", "dnorm_logits"):
        step = batch.step("cheats", name)
        assert [d.code for d in step.diagnoses] == ["uses-autograd"], name
        assert all(c.passed for c in step.cases), name  # right values: the autograd costs it
        assert step.score == 0


def test_turning_autograd_off_with_no_grad_is_not_using_it(batch: Batch) -> None:
    step = batch.step("cheats", "dbnraw")
    assert step.passed and step.diagnoses == []


def test_walking_frames_finds_only_the_lecture_case_answers_and_fails(batch: Batch) -> None:
    # The lecture case's upstream gradients are the true gradients, so its answers are there;
    # no other case's reference exists in a sandbox (see the memory test below).
    step = batch.step("cheats", "dh")
    assert not step.passed and step.score == 0
    assert [c.passed for c in step.cases] == [True, False, False, False, False]


def test_computing_the_reference_from_the_graders_own_cases_is_reported_as_autograd(
    batch: Batch,
) -> None:
    step = batch.step("cheats", "dW2")
    assert [d.code for d in step.diagnoses] == ["uses-autograd", "tampering"]
    assert step.score == 0


def test_a_float64_tensor_picked_from_the_garbage_collector_fails(batch: Batch) -> None:
    step = batch.step("cheats", "db2")
    assert not step.passed and step.score == 0 and step.diagnoses
    assert not any(c.passed for c in step.cases[1:])


def test_a_file_left_in_scratch_is_seen_by_later_steps_of_the_same_submission_only(
    batch: Batch,
) -> None:
    # A submission's steps share its sandbox's private /tmp: a later step reads what an earlier
    # one wrote, which gains it nothing (a step is given only forward tensors and its own
    # upstream gradients, which on the random-upstream cases are no step's answer). Another
    # submission has a /tmp of its own and finds nothing.
    _only_hostile_steps_failed(batch, "scratch")
    seen = batch.step("scratch", "dprobs")  # it loaded the `probs` of the writer's last case
    assert _reason(seen)[0] != "error"
    assert {c.status for c in seen.cases} <= {"wrong-value", "shape-mismatch"}
    code, message = _reason(batch.step("neighbour", "dprobs"))
    assert code == "error" and "FileNotFoundError" in message


# ---------------------------------------------------------------------------------------------
# memory


MEMORY_PROBE = """\
import gc, sys
frame = sys._getframe(1)
found = []
if frame.f_locals['case'] is frame.f_locals['cases'][0]:
    gc.unfreeze()
    seen = set()

    def take(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point() and id(t) not in seen:
            if 0 < t.numel() <= 10_000:
                copy = t.detach().reshape(-1).double()
                seen.update((id(t), id(copy)))
                found.append(copy)

    for o in gc.get_objects():
        if o is found:
            continue
        take(o)
        if type(o) is dict:
            for v in list(o.values()):
                take(v)
        elif type(o) in (list, tuple):
            for v in list(o):
                take(v)
    while frame is not None:
        for v in list(frame.f_locals.values()):
            take(v)
        frame = frame.f_back
parts = [torch.zeros(1, dtype=torch.float64)]
for t in found:
    parts += [torch.tensor([float(t.numel())], dtype=torch.float64), t]
dW2 = torch.cat(parts)
"""
"""Every floating tensor a sandbox can reach (the collector's objects, their containers, the
frames), flattened and sent back as one tensor: [0, numel, values..., numel, values...]."""


def _tensors_in(flat: torch.Tensor) -> dict[int, torch.Tensor]:
    """The probe's tensors, stacked by element count."""
    by_size: dict[int, list[torch.Tensor]] = {}
    i = 1
    while i < flat.numel():
        n = int(flat[i])
        by_size.setdefault(n, []).append(flat[i + 1 : i + 1 + n])
        i += 1 + n
    return {n: torch.stack(ts) for n, ts in by_size.items()}


def test_no_reference_is_in_a_sandboxs_memory_even_after_the_grader_computed_them_all() -> None:
    grader = Grader(seed=77, limits=Limits(wall_seconds=30.0))
    try:
        warm(grader.cases)  # every reference of every case now exists in the grader
        [(_, _, outcome)] = list(grader._server.run([("probe", [("dW2", MEMORY_PROBE)])]))
        assert outcome.status == "ok", outcome.detail
        lecture = parse_payload(outcome.payload, grader.cases)["lecture"].tensor
        assert lecture is not None
        tensors = _tensors_in(lecture)
        assert sum(len(t) for t in tensors.values()) > 100  # the probe saw the cases' tensors

        found: dict[str, set[str]] = {case.name: set() for case in grader.cases}
        for case in grader.cases:
            for step in STEPS:
                ref = case.reference(step).reshape(-1)
                candidates = tensors.get(ref.numel())
                if candidates is None:
                    continue
                worst = (candidates - ref).abs().amax(dim=1)
                if bool((worst <= RTOL * case.scale(step)).any()):
                    found[case.name].add(step.name)
    finally:
        grader.close()
    # The lecture case hands steps the true gradients as upstream gradients: all are there
    # (which also shows the probe works). dlogprobs does not depend on any upstream gradient,
    # so lecture-vjp's equals the lecture's. demb's values are those of its own input dembcat,
    # only reshaped. Nothing else: no reference of a random-upstream case is in memory.
    assert found["lecture"] == {s.name for s in STEPS}
    assert found["lecture-vjp"] == {"dlogprobs", "demb"}
    assert found["sizes-a"] == found["sizes-b"] == found["repeats"] == {"demb"}


# ---------------------------------------------------------------------------------------------
# an interrupted `backprop-ninja grade --json`, resumed


SLOW_STEP = {"dlogprobs": "import time\ntime.sleep(0.05)\n" + SOLUTIONS["dlogprobs"]}
"""0.25 s a notebook (five cases): the batch is still running at its first flush, after 2 s."""


def _grade(*args: str | Path, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autograder.cli", "grade", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_an_interrupted_json_batch_resumes_with_every_notebook_exactly_once(
    tmp_path: Path, how: str
) -> None:
    folder = tmp_path / "class"
    for i in range(40):
        make_notebook(folder / f"student{i:02}.ipynb", SLOW_STEP)
    out = tmp_path / "results.json"
    args = (folder, "--json", out, "--jobs", "2", "--quiet")

    proc = _grade(*args, start_new_session=True)
    deadline = time.monotonic() + 120
    while not out.exists():  # the first flush
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    tree = psutil.Process(proc.pid).children(recursive=True)
    if how == "SIGINT":  # Ctrl-C: the whole foreground process group
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.kill()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == (130 if how == "SIGINT" else -9), stderr
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == [], "a process of the killed grader survived it"

    partial = json.loads(out.read_text())  # never a partial file
    graded = [s["path"] for s in partial["submissions"]]
    assert 0 < len(graded) < 40
    leftovers = list(tmp_path.glob(".results.json.*.tmp"))
    # Ctrl-C removes the temporary file; SIGKILL in the middle of a write can orphan one.
    assert len(leftovers) == 0 if how == "SIGINT" else len(leftovers) <= 1

    resumed = _grade(*args, "--resume")
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert f"resuming: {len(graded)} already graded, {40 - len(graded)} to go" in stderr
    final = json.loads(out.read_text())
    paths = [s["path"] for s in final["submissions"]]
    assert sorted(paths) == sorted(str(p) for p in folder.glob("*.ipynb"))  # each exactly once
    assert final["seed"] == partial["seed"]
    assert final["submissions"][: len(graded)] == partial["submissions"]  # kept, not regraded
    assert all(s["score"] == 26 for s in final["submissions"])

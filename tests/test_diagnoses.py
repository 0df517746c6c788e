"""Diagnoses name the slip: the corpus of wrong answers and correct spellings, graded for real.

Strictness: a wrong answer's expected code must be its FIRST diagnosis (the one a student reads
first), not merely present; a correct spelling must pass with no diagnosis at all. Every answer
is graded by the real engine (the corpus in one batch, one Grader per session).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest
import torch

from autograder.core import portable
from autograder.core.portable import factor_name, fit_factor, identifiers, shape_slip
from autograder.diagnoses.diagnose import Evidence, diagnose
from autograder.diagnoses.evidence import (
    autograd_names,
    one_hot_without_classes,
    size_literals,
    tamper_names,
)
from autograder.diagnoses.messages import CODES, TEXT
from autograder.engine.grader import Grader
from autograder.exercises import DEFAULT
from autograder.grading.results import Diagnosis, StepResult
from autograder.sandbox.limits import Outcome

from .corpus import NOTED, RIGHT, WRONG, Answer

EX = DEFAULT
STEPS = EX.steps
Grade = Callable[[str, str], StepResult]

FLOAT = re.compile(r"\d\.\d|\d[eE][-+]?\d|\.\d")
"""Anything that looks like a tensor value (``0.25``, ``3e-05``, ``.5``) in a message."""


def _id(a: Answer) -> str:
    return f"{a.step}:{a.slip or a.code.splitlines()[-1]}"


# ---------------------------------------------------------------------------------------------
# the corpus itself


def test_corpus_is_large_and_covers_every_step_and_code() -> None:
    assert len(WRONG) >= 40
    assert len({a.step for a in WRONG}) == len(STEPS)
    right = Counter(a.step for a in RIGHT)
    assert all(right[s.name] >= 2 for s in STEPS), right
    expected = {a.expect for a in WRONG + NOTED}
    assert expected <= set(CODES)
    others = {"missing-cell", "not-implemented", "timeout", "not-a-tensor"}
    others |= {"update-sign", "update-missing", "update-scale", "update-parameter", "not-reset"}
    assert expected >= set(CODES) - others
    codes = {a.code for a in RIGHT if a.step == "dC"}
    assert any("for " in c and "+=" in c for c in codes)
    assert any("index_add_" in c for c in codes)
    assert any("one_hot" in c and "@" in c for c in codes)
    assert any("index_put_" in c and "accumulate=True" in c for c in codes)
    seen = [(a.step, a.code) for a in WRONG + RIGHT + NOTED]
    assert len(seen) == len(set(seen)), "an answer appears twice"
    assert not {a.code for a in RIGHT} & {s.answer for s in STEPS}


# ---------------------------------------------------------------------------------------------
# graded


@pytest.mark.parametrize("answer", WRONG, ids=_id)
def test_wrong_answer_fails_with_its_diagnosis_first(answer: Answer, grade: Grade) -> None:
    r = grade(answer.step, answer.code)
    assert not r.passed and r.score == 0
    codes = [d.code for d in r.diagnoses]
    assert codes[:1] == [answer.expect], (answer.slip, [d.message for d in r.diagnoses])


@pytest.mark.parametrize("answer", RIGHT, ids=_id)
def test_correct_spelling_passes_without_diagnosis(answer: Answer, grade: Grade) -> None:
    r = grade(answer.step, answer.code)
    assert r.passed, [d.message for d in r.diagnoses]
    assert r.diagnoses == []


@pytest.mark.parametrize("answer", NOTED, ids=_id)
def test_a_noted_answer_passes_with_only_its_note(answer: Answer, grade: Grade) -> None:
    r = grade(answer.step, answer.code)
    assert r.passed
    assert [d.code for d in r.diagnoses] == [answer.expect]


def _all_messages(grade: Grade) -> list[tuple[Answer, Diagnosis]]:
    return [(a, d) for a in WRONG + NOTED for d in grade(a.step, a.code).diagnoses]


def test_messages_reveal_no_values_and_no_solution_code(grade: Grade) -> None:
    for answer, d in _all_messages(grade):
        prose = d.message
        for line in EX.forward:  # the lecture's forward lines may be quoted (1e-5 is in one)
            prose = prose.replace(line.source, "")
        prose = prose.replace("1e-5", "").replace("1e-4", "")  # the batch norm's epsilon, named
        assert not FLOAT.search(prose), (answer.slip, d.message)
        for line in EX.step(answer.step).answer.splitlines():
            assert line.strip() not in d.message, (answer.slip, d.message)
        assert d.code in CODES


def _sentences(message: str) -> int:
    prose = re.sub(r"`[^`]*`", "code", message)
    prose = re.sub(r"\([^()]*(\([^()]*\))?[^()]*\)", "", prose)  # the exception's own text
    return len(re.findall(r"[.?!](?=\s|$)", prose))


def test_messages_are_one_or_two_sentences_that_name_the_step(grade: Grade) -> None:
    for answer, d in _all_messages(grade):
        assert 1 <= _sentences(d.message) <= 2, d.message
        assert answer.step in d.message or EX.step(answer.step).var in d.message, d.message


def test_every_message_template_fills_in() -> None:
    fields = {"found": "F", "want": "(1,)", "ndim": 1, "before": "x", "path": "p", "scale": "s"}
    fields |= {
        "seconds": 1,
        "detail": "",
        "problem": "",
        "used": "",
        "what": "",
        "how": "",
        "literals": "",
    }
    fields |= {"kind": "", "where": "", "hint": "", "dtype": "float64", "name": "", "var": ""}
    fields |= {"lines": "", "ups": "", "chain": "", "missing": "", "near": "", "limit": ""}
    fields |= {"factor": "", "term": "", "failed": "", "verb": "", "them": "", "parts": ""}
    for key, text in TEXT.items():
        assert "{" not in text.format(**fields), key


# ---------------------------------------------------------------------------------------------
# diagnoses the corpus cannot produce through a worker, and specific wording


def test_timeout_budget_missing_cell_and_stub(grader: Grader, grade: Grade) -> None:
    s = EX.step("dh")
    loop = grader.grade_code(EX, s, "while True:\n    pass")
    assert not loop.passed and [d.code for d in loop.diagnoses] == ["timeout"]
    assert not FLOAT.search(loop.diagnoses[0].message)
    spent = grader.judge(EX, s, "x = 1", Outcome("timeout", b"", "not run: the budget was spent"))
    assert [d.code for d in spent.diagnoses] == ["timeout"]
    assert "time budget" in spent.diagnoses[0].message
    missing = grader.judge(EX, s, None, None, "no cell dh")
    assert [d.code for d in missing.diagnoses] == ["missing-cell"]
    stub = grade("dh", '# YOUR CODE HERE\nraise NotImplementedError("dh: replace this line")')
    assert [d.code for d in stub.diagnoses] == ["not-implemented"]


def test_error_names_the_exception_and_the_line_of_the_cell(grade: Grade) -> None:
    r = grade("dbnvar", "x = bnvar + 1e-5\ny = x.nonexistent()\ndbnvar = y")
    assert [d.code for d in r.diagnoses] == ["error"]
    assert "AttributeError" in r.diagnoses[0].message
    assert "line 2" in r.diagnoses[0].message


def test_unassigned_and_not_a_tensor(grade: Grade) -> None:
    assert [d.code for d in grade("dh", "dH = dlogits @ W2.T").diagnoses] == ["error"]
    r = grade("dh", "dh = 0.0")
    assert [d.code for d in r.diagnoses] == ["not-a-tensor"]


def test_keepdim_wording(grade: Grade) -> None:
    missing = grade("dbnmeani", "dbnmeani = (-dbndiff).sum(0)").diagnoses[0].message
    assert "(64,)" in missing and "(1, 64)" in missing and "keepdim=True" in missing
    assert "`cmp`" in missing  # (64,) broadcasts against (1, 64): cmp would not have noticed
    extra = grade("db2", "db2 = dlogits.sum(0, keepdim=True)").diagnoses[0].message
    assert "(1, 27)" in extra and "(27,)" in extra and "without `keepdim`" in extra
    no_cmp = grade("dcounts_sum_inv", "dcounts_sum_inv = (counts * dprobs).sum(1)")
    assert "`cmp`" not in no_cmp.diagnoses[0].message  # (32,) against (32, 1) is (32, 32)


def test_a_shape_wrong_only_at_other_sizes_says_so(grade: Grade) -> None:
    r = grade("dbngain", "dbngain = torch.zeros(1, 64) + bnraw.sum()")
    assert [d.code for d in r.diagnoses] == ["shape-mismatch"]
    assert "other sizes" in r.diagnoses[0].message and "(1, 64)" in r.diagnoses[0].message


def test_a_huge_answer_is_judged_without_materialising_its_broadcast(grade: Grade) -> None:
    r = grade("dbngain", "dbngain = torch.zeros(2**18, 1)")  # 16M elements broadcast
    assert [d.code for d in r.diagnoses] == ["shape-mismatch"]


def test_view_restore_names_the_flat_shape(grade: Grade) -> None:
    message = grade("demb", "demb = dembcat").diagnoses[0].message
    assert "`embcat`" in message and "(32, 30)" in message and "(32, 3, 10)" in message


def test_bessel_and_branch_wording(grade: Grade) -> None:
    bessel = grade("dbndiff2", "dbndiff2 = (1.0 / n) * torch.ones_like(bndiff2) * dbnvar")
    assert "Bessel" in bessel.diagnoses[0].message and "`n-1`" in bessel.diagnoses[0].message
    branch = grade("dcounts", "dcounts = counts_sum_inv * dprobs").diagnoses[0].message
    assert "counts_sum = counts.sum(1, keepdims=True)" in branch and "`+=`" in branch


def test_a_shortcut_that_reads_the_upstream_names_the_hidden_path(grade: Grade) -> None:
    code = "dlogits = dnorm_logits.clone()\ndlogits[range(n), Yb] += dlogit_maxes.view(-1)"
    blamed = grade("dlogits", code).diagnoses[0].message
    assert "through `logit_maxes = logits.max(1, keepdim=True).values`" in blamed
    assert "carries almost nothing" in blamed
    fused = "dlogits = (F.softmax(logits, 1) - F.one_hot(Yb, num_classes=vocab_size)) / n"
    assert "carries almost nothing" not in grade("dlogits", fused).diagnoses[0].message


def test_hard_coded_size_names_the_literals(grade: Grade) -> None:
    message = grade("demb", "demb = dembcat.view(32, 3, 10)").diagnoses[0].message
    for literal, name in (("32", "`n`"), ("3", "`block_size`"), ("10", "`n_embd`")):
        assert f"{literal} for {name}" in message


def test_autograd_comes_first_and_blocks_even_a_right_answer(grade: Grade) -> None:
    code = "with torch.enable_grad():\n    dh = dlogits @ W2.T"
    r = grade("dh", code)
    assert not r.passed
    assert [d.code for d in r.diagnoses][:1] == ["uses-autograd"]  # then the error it raised


# ---------------------------------------------------------------------------------------------
# the evidence tests, on tensors


def test_fit_factor_recognises_multiples_and_rejects_other_answers() -> None:
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(8, 5, generator=g, dtype=torch.float64)
    tol = 1e-4 * float(ref.abs().max())
    assert fit_factor((-ref).float(), ref, tol) == pytest.approx(-1, abs=1e-4)
    assert fit_factor((31 / 32 * ref).float(), ref, tol) == pytest.approx(31 / 32, abs=1e-4)
    assert fit_factor(ref.float() ** 2, ref, tol) is None
    assert fit_factor(ref.float(), torch.zeros_like(ref), tol) is None  # nothing to fit
    part = torch.randn(8, 5, generator=g, dtype=torch.float64)
    assert fit_factor(ref.float(), part, tol, base=ref) == pytest.approx(0, abs=1e-4)


def test_factor_name_reads_factors_in_each_case_own_batch_size() -> None:
    assert factor_name([((n - 1) / n, n) for n in (32, 45, 19)]) == "bessel"
    assert factor_name([(float(n), n) for n in (32, 45)]) == "missing-1/n"
    assert factor_name([(1 / n, n) for n in (32, 45)]) == "extra-1/n"
    assert factor_name([(0.5, 32), (0.5, 45)]) == "half"
    assert factor_name([(3.0, 32), (3.0, 45)]) == "constant"
    assert factor_name([(31 / 32, 32), (31 / 32, 32)]) == "constant"  # one n: no rule in n
    assert factor_name([(1.3, 32), (0.7, 45)]) is None
    assert factor_name([(0.0, 32)]) is None and factor_name([]) is None


def test_shape_slips() -> None:
    assert shape_slip((64,), (1, 64)) == "missing-keepdim"
    assert shape_slip((1, 27), (27,)) == "extra-keepdim"
    assert shape_slip((32, 64), (1, 64)) == "not-summed"
    assert shape_slip((1, 64), (32, 64)) == "summed"
    assert shape_slip((1, 27), (32, 1)) == "wrong-dim"
    assert shape_slip((32, 30), (32, 3, 10)) == "reshaped"
    assert shape_slip((32,), (27,)) == "other"


def test_source_support() -> None:
    assert autograd_names("dC = C.grad") == ["grad"]
    assert autograd_names("grad = dlogits  # no autograd here\ndh = grad @ W2.T") == []
    assert autograd_names("x.requires_grad = True\ny.backward()") == ["requires_grad", "backward"]
    assert one_hot_without_classes("F.one_hot(Yb).float()")
    assert not one_hot_without_classes("F.one_hot(Yb, num_classes=vocab_size)")
    assert not one_hot_without_classes("F.one_hot(Yb, 27)")
    assert size_literals("x.view(32, 3, 10) * 2 + h**3 + y**-3") == [32, 3, 10]


def test_diagnose_is_empty_for_a_correct_step(grader: Grader) -> None:
    s = EX.step("dC")
    r = grader.grade_code(EX, s, s.answer)
    assert r.passed and r.diagnoses == []
    ev = Evidence(EX, s, s.answer, grader.cases(EX), {}, r.cases, problem="no answers")
    assert [d.code for d in diagnose(ev)] == ["error"]


def test_a_name_that_is_not_a_gradient_is_named_and_a_near_miss_suggested(grade: Grade) -> None:
    r = grade("dprobs", "dprobs = (1.0 / probs) * dlogprobs * bs / n")
    message = r.diagnoses[0].message
    assert "`bs` is not one of the names a step sees" in message
    near = grade("dlogits", "dlogits = dnorm_logits.clone() + dlogits_maxes * 0").diagnoses[0]
    assert "Did you mean `dlogit_maxes`?" in near.message
    other = grade("dcounts", "dcounts = counts_sum_inv * dprobs + dnorm_logits")
    assert "not the other gradients you computed" in other.diagnoses[0].message


def test_running_out_of_memory_says_so(grade: Grade) -> None:
    r = grade("dh", "big = torch.empty(2**40, dtype=torch.uint8)\ndh = dlogits @ W2.T")
    assert [d.code for d in r.diagnoses] == ["error"]
    assert "ran out of memory" in r.diagnoses[0].message


@pytest.mark.parametrize(
    ("code", "without"),
    [
        ("F.one_hot(Yb)", True),
        ("F.one_hot(Yb, 27)", False),
        ("F.one_hot(Yb, num_classes=27)", False),
        ("x = F.one_hot(Yb[idx(1, 2)])", True),  # commas inside its argument are not a second
        ("F.one_hot(t(a), n)", False),
        ("a = (F.one_hot(Yb), F.one_hot(Yb, 27))", True),
        ("a = F.one_hot(Yb, 27) + F.one_hot(Yb)", True),
        ("F.one_hot(", False),  # never closed
        ("dlogprobs = " + "one_hot(" * 6000 + "(" * 51_000, False),  # one pass, not 6000
    ],
)
def test_a_one_hot_call_without_the_number_of_classes_is_found_in_one_pass(
    code: str, without: bool
) -> None:
    assert one_hot_without_classes(code) is without


REACHES = {
    "full-width letters": "import ｏｓ, sys\nｏｓ.ｄｕｐ2(ｏｓ.open('/dev/null', 1), 4)",
    "a formatter's fields": "import string\n"
    "get = string.Formatter().get_field\nA = get('0.modules[__main__].ANSWERING', [sys], {})[0]",
    "a name resolved": "import pkgutil\nga = pkgutil.resolve_name('builtins:get' + 'attr')",
    "os under another name": "import posix\nposix.close(4)",
    "imported from torch": "from torch.serialization import os\nos = os",
    "a file descriptor opened": "open(4, 'wb').close()",
    "a guard through an alias": "on = torch.inference_mode\nwith on(False):\n    pass",
    "a guard with its flag": "with torch.inference_mode(mode=False):\n    pass",
    "a stack frame": "import sys\nf = sys._getframe(1)",
    "the runner": "import sys\nsys.modules['__main__']",
    "a dunder": "x = dh.__class__",
    "an interpreter": "import code\ncode.InteractiveInterpreter().runsource('x')",
    "IPython itself": "import IPython.display\nIPython.utils",
    "annotations evaluated": "import typing\nx = typing.get_type_hints(K, {'torch': torch})",
    "a dispatcher's annotations": "import functools\n@functools.singledispatch\ndef f(x): pass",
    "a class made of strings": "K = type('K', (), {'x': 1})",
    "a class pattern": "match obj:\n    case Pattern(value):\n        pass",
    "inside an f-string": 'import sys\n_ = f"{(h := sys.getprofile()) is None}"',
    "inside a format spec": "_ = f\"{x:{getattr(torch, 'autograd')}}\"",
    "after a lone carriage return": '\ry = getattr(torch, "autograd")\n',
    "an object array unpickled": "ga, sa = np.load('p.npy', None, True)",
    "a checkpoint unpickled": "x = torch.load('p.pt', weights_only=False)",
    "a dotted string fetched": "m = torch.nn.Module()\nm.t = torch\n"
    "f = torch.fx.Interpreter(m, graph=torch.fx.Graph()).fetch_attr\nf('t.autograd')",
    "a full-width low line": "f_builtins = builtins = None\ndef frames():\n    yield\n"
    "ga = frames().gi_frame.f\uff3fbuiltins['getattr']",
    "a module found by a string": "import sys\nfor finder in sys.path_importer_cache.values():\n"
    "    spec = finder.find_spec('code')",
    "sys reached through torch": "cache = torch.sys.path_importer_cache",
    "sys handed on": "import sys\nm.s = sys",
    "a code object renamed": "def g():\n    yield XXXX\n"
    "ga = next(type(g)(g().gi_code.replace(co_names=('getattr',)), {})())",
    "a name pasted into code": "fn = F.hardtanh\nfn.__name__ = 'hardtanh if exec(x) else f'",
    "a dunder by a string": "K = type(type)('K', (), {'__getattr__': f})",
    "a plot": "import matplotlib.pyplot as plt\nplt.imshow(dh)",
    "attributes copied by name": "import functools\nfunctools.update_wrapper(a, b, ('x',))",
    "a class with attributes by name": "import dataclasses\n"
    "S = dataclasses.make_dataclass('S', [], namespace={'x': 1})",
    "a string measured": "import numpy as np\nnp.testing.measure('x = 1')",
    "a statement timed": "import torch.utils.benchmark\ntorch.utils.benchmark.Timer('x').timeit(1)",
    "a schema's annotations": "torch.library.infer_schema(S, mutates_args=())",
    "a Fortran helper": "import numpy.f2py.crackfortran as cf\ncf.myeval('x', g, g)",
    "a template's attributes": "try:\n    '{0.__self__.x}'.format(print)\n"
    "except AttributeError as e:\n    g = e.obj",
    "a template built": "t = '{0.' + 'x}'\nt.format(print)",
    "a dotted name resolved": "torch.set_default_tensor_type('builtins.getattr')",
    "annotations evaluated again": "g = torch.cuda.memory.signature(f, eval_str=True)",
    "a dataclass's generated code": "import dataclasses\n@dataclasses.dataclass\nclass B:\n"
    "    a: object = None",
    "a module found by name": "m = torch.cuda.amp.common.find_spec('x').loader.load_module('x')",
    "a module under another name": "torch.cuda.tunable.mp.spawn.prepare({})",
    "a module imported from torch": "from torch.nn.functional import dataclasses as dc",
    "sys imported from torch": "from torch import sys as S\nS.path.insert(0, '/tmp')",
    "a refused module imported bare": "from torch import fx",
    "a test module's globals": "from numpy.tests.test_warnings import pytest as T",
    "a standard module as an attribute": "x = torch.storage.io",
}
"""Ways out of computing that an answer must name, each refused (several from attacks that
got full marks with autograd before the names were read as Python reads them)."""

HONEST = {
    "a variable called types": "types = -dbndiff\ndbnvar = types",
    "a variable called signal": "signal = 1.0 / probs\ndprobs = signal * dlogprobs",
    "printing to stderr": "import sys\nprint(dh.shape, file=sys.stderr)",
    "a type's name": "print(type(dh).__name__)",
    "grad mode off": "with torch.inference_mode():\n    x = 1\n"
    "with torch.inference_mode(True):\n    y = 1",
    "imports that compute": "import numpy as np, math\nfrom torch import nn\n"
    "import torch.nn.functional as F\nfrom collections import Counter",
    "an update of the lecture's": "torch._foreach_add_(parameters, grads, alpha=-lr)",
    "a class of one's own": "class Tanh:\n    def __init__(self, out):\n        self.out = out\n"
    "    def __mul__(self, other):\n        return self.out * other",
    "a literal pattern": "match block_size:\n    case 3:\n        k = 1",
    "a type looked at": "print(type(dh), type(dh) is torch.Tensor)",
    "a display": "from IPython.display import display\ndisplay(dh[:3])",
    "an f-string in a print": 'print(f"{dh.shape} {dh.mean():.3f} {type(dh).__name__!r:>{w}}")',
    "Windows line ends": "dh = dlogits @ W2.T\r\ndW2 = h.T @ dlogits\r\n",
    "sys for printing": "import sys\nfrom sys import stderr\n"
    "print(dh.shape, sys.maxsize, file=stderr)",
    "a main guard": "if __name__ == '__main__':\n    print('__init__ docs')",
    "zeros without a graph": "dlogits = torch.zeros_like(logits, requires_grad=False)",
    "what torch and numpy compute with": "from torch.nn import functional\nfrom torch import nn\n"
    "from numpy import random\nimport numpy.linalg\nfrom collections import Counter\n"
    "y = np.array([1]).copy()\nz = dh.chunk(2)[0].select(0, 1)\nt = dh.trace()",
    "a formatted print": "print('{:.4f} {} {:>{w}} {b[0]}'.format(loss, n, 'x', w=3, b=[1]))",
}
"""Honest code near those names: none refused."""


@pytest.mark.parametrize("code", REACHES.values(), ids=list(REACHES))
def test_code_that_reaches_outside_computing_is_named(code: str) -> None:
    assert tamper_names(code), code


@pytest.mark.parametrize("code", HONEST.values(), ids=list(HONEST))
def test_honest_code_near_those_names_is_not(code: str) -> None:
    assert tamper_names(code) == [] and autograd_names(code) == [], code


def test_every_name_the_compiler_reads_is_one_the_check_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # whatever hides a name from the token scan (a tokenizer that reads the code otherwise than
    # the compiler does) leaves it in the compiler's names: refused as hidden
    hidden = "x = 1\n\ry = getprofile\n"
    assert identifiers(hidden) == {"x", "y", "getprofile"}
    assert "getprofile" in tamper_names(hidden)
    every = "import a.b as c\nfrom d import e\ndef f(g, *h, i=1, **j): global k\nf(l=2)\n"
    assert identifiers(every) >= set("abcdefghijkl")
    assert tamper_names("def f(g, *h, i=1, **j):\n    return g\nf(1, i=2)") == []
    # the safety net itself: a token scan that misses a name (as tokenize once missed the code
    # in f-strings) leaves it among the compiler's names, and it is refused as hidden
    monkeypatch.setattr(portable, "tokens", lambda code: [])
    assert tamper_names("ordinary = 1") == ["ordinary"]


AUTOGRAD_IN_NAME_ONLY = {
    "gradients cleared, as the lecture's loop does": (
        "for p in parameters:\n    p.grad = None",
        "for p in parameters:\n    p.grad = 0",
    ),
    "grad mode off": (
        "with torch.set_grad_enabled(False):\n    x = 1",
        "with torch.set_grad_enabled(True):\n    x = 1",
    ),
    "requires_grad looked at": (
        "print(counts.requires_grad, counts.requires_grad == False)",
        "counts.requires_grad = True",
    ),
    "a grad of one's own, micrograd style": (
        "class Linear:\n    def __init__(self, w):\n        self.w = w\n        self.grad = None\n"
        "    def back(self, dout):\n        self.grad = dout @ self.w.T\n        return self.grad",
        "class Linear:\n    def back(self, dout):\n        return self.grad",
    ),
    "a backward method of one's own": (
        "class Tanh:\n    def backward(self, dout):\n        return dout\n"
        "dhpreact = Tanh().backward(dh)",
        "dhpreact = h.backward(dh)",
    ),
}
"""Code with autograd's names that uses nothing of it, each with a control that does."""


@pytest.mark.parametrize("pair", AUTOGRAD_IN_NAME_ONLY.values(), ids=list(AUTOGRAD_IN_NAME_ONLY))
def test_autograd_in_name_only_is_not_autograd(pair: tuple[str, str]) -> None:
    code, control = pair
    assert autograd_names(code) == [] and tamper_names(code) == [], code
    assert autograd_names(control), control

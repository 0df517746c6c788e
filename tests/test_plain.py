"""``is_plain``: the static check that lets a submission's answers share a process.

The plain steps of a submission run one after another in one process, so what plain code cannot
do is what keeps them apart: every way out of tensor arithmetic (an import, an assignment to an
attribute, a dunder, a lambda, reflection, a context manager, a file) must make code not plain.
Being plain is only about speed: an answer that is not plain runs in a process of its own and is
graded the same, so every correct spelling the kit knows should be plain, or grading it is slower.
"""

from __future__ import annotations

import pytest

from autograder.core.cases import build
from autograder.diagnoses.evidence import tamper_names
from autograder.exercises import DEFAULT, EXERCISES
from autograder.grading import plain

from .corpus import NOTED, RIGHT, WRONG, Answer

PROVIDED = DEFAULT.provided


def is_plain(code: str) -> bool:
    return plain.is_plain(code, PROVIDED)


@pytest.mark.parametrize(
    ("exercise", "name"),
    [(ex.id, s.name) for ex in EXERCISES.values() for s in ex.steps if s.kind == "gradient"],
)
def test_every_model_answer_is_plain(exercise: str, name: str) -> None:
    ex = EXERCISES[exercise]
    assert plain.is_plain(ex.step(name).answer, ex.provided)


@pytest.mark.parametrize(
    "answer", RIGHT + NOTED, ids=[f"{a.step}-{i}" for i, a in enumerate(RIGHT + NOTED)]
)
def test_every_correct_spelling_of_the_corpus_is_plain(answer: Answer) -> None:
    # but a class of the answer's own (a micrograd-style layer): it runs in a process alone
    assert is_plain(answer.code) != answer.code.startswith("class "), answer.code


def test_every_slip_of_the_corpus_is_plain_unless_it_uses_autograd_or_tampers() -> None:
    escapes = [a for a in WRONG if a.expect == "uses-autograd" or tamper_names(a.code)]
    assert [a.code for a in WRONG if a not in escapes and not is_plain(a.code)] == []
    assert not is_plain("dC = C.grad")  # the corpus's autograd slip: `.grad` is no arithmetic


def test_every_name_a_step_is_given_may_be_read_by_plain_code() -> None:
    for case in build(DEFAULT, 0):
        for step in DEFAULT.steps:
            assert set(case.inputs(step)) <= PROVIDED, step.name
            for name in case.inputs(step):
                assert is_plain(f"x = {name}"), name


PLAIN = {
    "loops": "dC = torch.zeros_like(C)\nfor k in range(n):\n    for j in range(block_size):\n"
    "        if Xb[k, j] >= 0:\n            dC[Xb[k, j]] += demb[k, j]\n        else:\n"
    "            continue",
    "while": "i = 0\nwhile i < 3:\n    i += 1\n    if i > 5:\n        break",
    "comprehension": "rows = [demb[k] for k in range(n) if k >= 0]\nx = sum(r.sum() for r in rows)",
    "keywords-and-slices": "x = F.one_hot(Yb, num_classes=vocab_size).float()[::2, None, ...]",
    "builtins": "x = max(abs(-1), min(2, 3), len([1]), round(2.5), int(True))\n"
    "print(x, sorted([2, 1]))",
    "comparisons": "x = (logits == logit_maxes).float() if not False else None",
    "names-it-assigns": "tmp = h.T\nout = tmp @ dlogits\ndW2 = out",
}


@pytest.mark.parametrize("code", PLAIN.values(), ids=PLAIN.keys())
def test_tensor_arithmetic_with_loops_conditions_and_comprehensions_is_plain(code: str) -> None:
    assert is_plain(code)


ESCAPES = {
    # changing what other code sees
    "attribute assignment": "torch.zeros_like = torch.ones_like",
    "attribute assignment on a tensor": "dprobs = probs.clone()\ndprobs.data = probs",
    "augmented attribute assignment": "F.softmax += 1",
    "setattr": "setattr(torch, 'zeros_like', None)",
    "delattr": "delattr(torch, 'zeros_like')",
    "del": "del torch",
    "global": "global torch\ntorch = None",
    # reaching past the arithmetic
    "dunder attribute": "x = probs.__class__",
    "dunder method": "dprobs = probs.__add__(probs)",
    "dunder name": "x = __name__",
    "__builtins__": "b = __builtins__",
    "name starting with _": "_x = probs",
    "attribute starting with _": "x = torch._C",
    "import": "import os",
    "from import": "from os import system",
    "__import__": "os = __import__('os')",
    "importlib through an attribute": "x = torch.importlib",
    "getattr": "ag = getattr(torch, 'autograd')",
    "globals()": "g = globals()",
    "locals()": "g = locals()",
    "vars()": "g = vars(torch)",
    "type()": "t = type(probs)",
    "exec": "exec('import os')",
    "eval": "x = eval('1 + 1')",
    "compile": "c = compile('1', 'x', 'eval')",
    "open": "f = open('/etc/passwd')",
    "breakpoint": "breakpoint()",
    "input": "x = input()",
    "str.format": "x = '{0.__class__}'.format(probs)",
    "f-string": "x = f'{probs!r}'",
    "a name neither given nor assigned": "x = os",
    # autograd
    "grad": "dC = C.grad",
    "backward": "probs.backward(dlogprobs)",
    "requires_grad": "x = probs.requires_grad_()",
    "torch.autograd": "g = torch.autograd.grad",
    "register_hook": "probs.register_hook(print)",
    # code of its own
    "lambda": "f = lambda x: x",
    "def": "def f():\n    return 1",
    "class": "class A:\n    pass",
    "async def": "async def f():\n    pass",
    "with": "with torch.no_grad():\n    dprobs = (1.0 / probs) * dlogprobs",
    "try": "try:\n    x = 1\nexcept Exception:\n    pass",
    "raise": "raise SystemExit(3)",
    "assert": "assert probs is not None",
    "walrus": "y = (x := probs)",
    "starred call": "print(*[probs])",
    "dict literal": "d = {'a': probs}",
    "set literal": "s = {1, 2}",
    "bytes literal": "b = b'\\x00'",
    "a tensor method outside the list": "x = probs.numpy()",
    # values an earlier step in the process left in memory
    "empty": "dC = torch.empty(27, 10)",
    "empty_like": "dC = torch.empty_like(C) * 0.0",
    "a string method outside the list": "x = 'a'.join(['b'])",
    # not even code
    "syntax error": "dprobs = (",
    "null byte": "x = 1\0",
    "nesting past the parser": "x = " + "-" * 100_000 + "1",
}


@pytest.mark.parametrize("code", ESCAPES.values(), ids=ESCAPES.keys())
def test_each_way_out_of_tensor_arithmetic_is_not_plain(code: str) -> None:
    assert not is_plain(code)

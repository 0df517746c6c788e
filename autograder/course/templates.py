"""The words and code of a notebook, made from an exercise: setup cells, the forward pass, and each
step's explanation, answer cell and check cell.

The setup cells are the lecture's (names.txt, the dataset, the parameters from one seeded
generator, the batch); the forward pass is the exercise's own lines, each with its shape; each
step's text comes from the exercise. The notebook needs only torch: its checks are the kit's
:mod:`autograder.course.checks`, whose source is placed in a locked cell of its own.
"""

from __future__ import annotations

import inspect
import pprint
import textwrap

from ..core import portable
from ..core.portable import LEARNING_RATE
from ..dataset.names import NAMES_SHA256, NAMES_URL
from ..exercises.definition import LECTURE, ROOT, Exercise, Step
from ..exercises.mlp import LECTURE_SEED
from . import checks

GRADING = """\
**How it is graded.** Each step is graded on its own: the grader runs your answer cell in a fresh
namespace holding the forward tensors and the upstream gradients, supplied by the grader and never
your own earlier answers, so a wrong step costs that step only. It runs under several hidden
configurations: the lecture's tensors, the same tensors with random upstream gradients, other sizes
of every dimension, batches that use some rows of `C` many times, and features whose variance is
tiny. So:

- never write sizes in by hand (32, 27, 10, 64): use `n`, `vocab_size`, `block_size`, `n_embd`,
  `n_hidden`, or the tensors' shapes;
- write every branch of the chain rule, even where the true gradient happens to be zero
  (`dlogit_maxes`, `db1`): random upstream gradients show a missing or wrong branch;
- do not modify the tensors you read (copy with `.clone()` before an in-place `+=`);
- no autograd in answers (`.grad`, `.backward()`, `torch.autograd`, `requires_grad`,
  `retain_grad`): the gradients must come from your chain rule.

**The checks tell you what the grader will say.** The locked cell after each answer runs that
answer the way the grader does: on its own, with autograd's upstream gradients (so an earlier
mistake never spoils a later check), on the lecture's tensors and on a few public configurations
of its own (other sizes, random upstream gradients, a batch reusing rows of `C`, nearly constant
features). It prints one line per configuration and, when the step is wrong, what is wrong in
words, and then stops with an error, so *Run All* stops at your first wrong step. The grader's
configurations are other ones, drawn from its own seed."""


def intro(ex: Exercise) -> str:
    """The notebook's first cell."""
    n_steps = len(ex.steps)
    points = {s.points for s in ex.steps}
    each = f"Each step is worth {points.pop():g} point" if len(points) == 1 else "Steps differ"
    body = ex.text.intro.format(n_steps=n_steps)
    return (
        f"# {ex.text.title}\n\n{body}\n\n{GRADING}\n\n{each}; run the cells from the top, in order."
    )


SETUP_INTRO = """\
## Setup

Run these cells once. They need only PyTorch and `names.txt`, which is looked for at
`$BACKPROP_NINJA_NAMES` if that is set, then beside this notebook and in `data/`, and otherwise
downloaded."""

IMPORTS = """\
import os
import pathlib
import random
import urllib.request

import torch
import torch.nn.functional as F"""

LOAD_NAMES = f"""\
# names.txt: $BACKPROP_NINJA_NAMES, beside this notebook, in data/, or downloaded
NAMES_URL = '{NAMES_URL}'

def find_names():
    candidates = [pathlib.Path('names.txt'), pathlib.Path('data/names.txt'),
                  pathlib.Path('../../data/names.txt')]
    if os.environ.get('BACKPROP_NINJA_NAMES'):
        candidates.insert(0, pathlib.Path(os.environ['BACKPROP_NINJA_NAMES']))
    for path in candidates:
        if path.is_file():
            return path
    print(f'names.txt not found here, downloading it from {{NAMES_URL}}')
    try:
        with urllib.request.urlopen(NAMES_URL, timeout=20) as response:
            pathlib.Path('names.txt').write_bytes(response.read())
    except OSError:
        message = ('names.txt is not here and could not be downloaded (no network?). Put '
                   'a copy (SHA-256 {NAMES_SHA256[:16]}...) beside this notebook and run '
                   'this cell again.')
        raise FileNotFoundError(message) from None
    return pathlib.Path('names.txt')

names_path = find_names()
words = names_path.read_text().splitlines()
print(len(words), 'names from', names_path)
print(words[:8])"""

DATASET = f"""\
# build the vocabulary of characters and mappings to/from integers
chars = sorted(list(set(''.join(words))))
stoi = {{s:i+1 for i,s in enumerate(chars)}}
stoi['.'] = 0
itos = {{i:s for s,i in stoi.items()}}
vocab_size = len(itos)
print(itos)
print(vocab_size)

# build the dataset
block_size = {LECTURE.block_size} # context length: how many characters predict the next one

def build_dataset(words):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + '.':
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix] # crop and append
    X = torch.tensor(X)
    Y = torch.tensor(Y)
    print(X.shape, Y.shape)
    return X, Y

random.seed(42)
random.shuffle(words)
n1 = int(0.8*len(words))
n2 = int(0.9*len(words))

Xtr,  Ytr  = build_dataset(words[:n1])     # 80%
Xdev, Ydev = build_dataset(words[n1:n2])   # 10%
Xte,  Yte  = build_dataset(words[n2:])     # 10%"""

PARAMS = f"""\
n_embd = {LECTURE.n_embd} # the dimensionality of the character embedding vectors
n_hidden = {LECTURE.n_hidden} # the number of neurons in the hidden layer of the MLP

g = torch.Generator().manual_seed({LECTURE_SEED}) # for reproducibility
C  = torch.randn((vocab_size, n_embd),            generator=g)
# Layer 1
W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5/3)/((n_embd * block_size)**0.5)
b1 = torch.randn(n_hidden,                        generator=g) * 0.1 # small, not zero
# Layer 2
W2 = torch.randn((n_hidden, vocab_size),          generator=g) * 0.1
b2 = torch.randn(vocab_size,                      generator=g) * 0.1
# BatchNorm parameters: random too, since exact ones and zeros hide wrong answers
bngain = torch.randn((1, n_hidden), generator=g)*0.1 + 1.0
bnbias = torch.randn((1, n_hidden), generator=g)*0.1

parameters = [C, W1, b1, W2, b2, bngain, bnbias]
print(sum(p.nelement() for p in parameters)) # number of parameters in total
for p in parameters:
    p.requires_grad = True"""

BATCH = f"""\
batch_size = {LECTURE.batch_size}
n = batch_size # a shorter variable also, for convenience
# construct a minibatch
ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
Xb, Yb = Xtr[ix], Ytr[ix] # batch X,Y"""


CHECKS_INTRO = """\
### The checks

The locked cell below holds the checks that run after each of your answers: the kit's own code
(its forward pass, references and diagnoses, which need only torch). You need not read it; run
it once."""

NOTEBOOK_PART = ("# --- the notebook's part ---", "# --- end of the notebook's part ---")


def checks_source(ex: Exercise) -> str:
    """The locked cell holding the checks: :mod:`autograder.core.portable` and the notebook's
    part of :mod:`autograder.course.checks`, verbatim, then the exercise they check, as data."""
    math = inspect.getsource(portable).replace("from __future__ import annotations\n", "")
    driver = inspect.getsource(checks)
    start, end = driver.index(NOTEBOOK_PART[0]), driver.index(NOTEBOOK_PART[1])
    part = driver[start + len(NOTEBOOK_PART[0]) : end].strip("\n")
    spec = pprint.pformat(checks.exercise_spec(ex), width=99, sort_dicts=False)
    return (
        f"{math.rstrip()}\n\n\nimport os\nimport textwrap\nimport types\n\n{part}\n\n\n"
        f"EXERCISE = {spec}\nCHECKS = Checks(EXERCISE, globals())"
    )


TRAIN_AND_SAMPLE = """\
# train from the seeded initialisation with your cells, then sample names
trained = CHECKS.train({name!r}, steps=1000)

with torch.no_grad():
    # the batch norm's mean and variance over the whole training set, for sampling one at a time
    hpreact = trained['C'][Xtr].view(Xtr.shape[0], -1) @ trained['W1'] + trained['b1']
    bnmean = hpreact.mean(0, keepdim=True)
    bnvar = hpreact.var(0, keepdim=True, unbiased=True)
    g = torch.Generator().manual_seed(2147483647 + 10)
    for _ in range(10):
        out, context = [], [0] * block_size
        while True:
            emb = trained['C'][torch.tensor([context])]
            hpreact = emb.view(1, -1) @ trained['W1'] + trained['b1']
            bnraw = (hpreact - bnmean) * (bnvar + 1e-5)**-0.5
            hpreact = trained['bngain'] * bnraw + trained['bnbias']
            logits = torch.tanh(hpreact) @ trained['W2'] + trained['b2']
            ix = torch.multinomial(F.softmax(logits, dim=1), num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0:
                break
        print(''.join(itos[i] for i in out))"""


def forward_source(ex: Exercise) -> str:
    """The exercise's forward pass, then autograd's backward pass (for the checks)."""
    width = max(len(line.source) for line in ex.forward) + 2
    lines = ["# forward pass"]
    for line in ex.forward:
        if line.section:
            lines.append(line.section)
        lines.append(f"{line.source:<{width}}# {ex.shape_words(line.var)}")
    retained = [line.var for line in ex.forward if line.var != ROOT]
    listing = textwrap.fill(
        ", ".join(retained), width=92, initial_indent="for t in [", subsequent_indent=" " * 10
    )
    lines += [
        "",
        "# PyTorch backward pass: keep the gradient of every intermediate (parameters keep theirs)",
        "for p in parameters:",
        "    p.grad = None",
        listing + "]:",
        "    t.retain_grad()",
        "loss.backward()",
        "loss",
    ]
    return "\n".join(lines)


def step_markdown(ex: Exercise, step: Step, index: int) -> str:
    """The explanation of a step: heading, teaching text, forward line(s), upstream, shape."""
    if step.kind == "training":
        return f"### Step {index} of {len(ex.steps)}: `{step.name}`\n\n{step.text}"
    consumer_lines = ex.consumer_lines(step)
    lines = "\n".join(consumer_lines)
    paths = "this line" if len(consumer_lines) == 1 else f"these {len(consumer_lines)} lines"
    upstream = ", ".join(f"`{u}`" for u in step.upstream) or "none (`dloss` is 1)"
    shape = ex.concrete_shape(step.var, LECTURE)
    return (
        f"### Step {index} of {len(ex.steps)}: `{step.name}`\n\n"
        f"{step.text}\n\n"
        f"The gradient flows back into `{step.var}` through {paths} of the forward pass:\n\n"
        f"```python\n{lines}\n```\n\n"
        f"- upstream gradients: {upstream}\n"
        f"- shape of `{step.name}`: `{ex.shape_words(step.var)}`, the shape of `{step.var}` "
        f"(`{shape}` here)"
    )


def given_source(ex: Exercise) -> str | None:
    """The upstream gradients a step reads but no earlier step computes, from autograd (the
    lecture's Exercise 3 starts from ``dhpreact``); None when there are none."""
    made: set[str] = set()
    given: list[str] = []
    for step in ex.steps:
        given += [u for u in step.upstream if u not in made and u not in given]
        made.add(step.name)
    if not given:
        return None
    lines = ["# the upstream gradients you start from, as autograd computed them"]
    lines += [f"{name} = {name[1:]}.grad.clone()" for name in given]
    return "\n".join(lines)


def before_training(ex: Exercise) -> str:
    """The locked cell before a training step's answer: what the update cell works on here (in
    the training run it gets the real parameters and your gradients of each batch)."""
    names = ", ".join(ex.parameters)
    grads = ", ".join("d" + p for p in ex.parameters)
    return (
        "# here the update works on copies of the parameters, with your gradients of the batch\n"
        f"parameters = [p.detach().clone() for p in [{names}]]\n"
        f"grads = [{grads}]\n"
        f"lr = {LEARNING_RATE}"
    )


def outro_source(ex: Exercise) -> str | None:
    """The closing code cell of an exercise with a training step (train longer, sample)."""
    training = [s for s in ex.steps if s.kind == "training"]
    return TRAIN_AND_SAMPLE.format(name=training[0].name) if training else None


def answer_source(step: Step) -> str:
    """The answer cell of the source: the model answer between nbgrader's solution markers."""
    return f"### BEGIN SOLUTION\n{step.answer}\n### END SOLUTION"


def check_source(ex: Exercise, step: Step) -> str:
    """The grade cell: the hidden test that calls the kit's engine, then the visible check.

    The hidden test comes first so that, under nbgrader's stock ``Execute``, the step's grade
    depends on its own answer only; the visible check (which raises for a wrong step, so that
    *Run All* and *Validate* stop there) does not raise under autograde, where the hidden test
    has decided the points. Students never see the hidden part.
    """
    return (
        "### BEGIN HIDDEN TESTS\n"
        "from autograder.incell import check_step\n"
        f'check_step("{step.name}", In[-2], "{ex.id}")\n'
        "### END HIDDEN TESTS\n"
        f"CHECKS.check('{step.name}')"
    )

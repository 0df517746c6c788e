"""Authoring the course: the nbgrader source notebook, generated from the step catalog.

``source/backprop_ninja/backprop_ninja.ipynb`` is written here from :data:`catalog.STEPS`,
:data:`catalog.FORWARD` and :data:`solutions.SOLUTIONS`; nbgrader then derives the student and
solution notebooks from it with the course's ``nbgrader_config.py``:

    source/     setup, forward pass, and per step: explanation, answer cell (solution between
                nbgrader's markers), locked grade cell (visible check + hidden tests)
    exercises/  nbgrader generate_assignment: answers become stubs, hidden tests are removed
    solutions/  nbgrader generate_solution: answers kept, hidden tests removed

``backprop-ninja build`` runs the whole chain (nbgrader works in a temporary copy of the course, so
no gradebook or stray files land in the repository) and also refreshes
``examples/buggy/backprop_ninja.ipynb``, a submission with typical slips. Every file it writes is a
pure function of the catalog and the nbgrader version, so CI can compare the committed notebooks
with a fresh build.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode

from .catalog import FORWARD, PARAMETERS, SHAPES, STEPS, Step
from .model import LECTURE, LECTURE_SEED, REPO_ROOT
from .names import NAMES_URL
from .solutions import SOLUTIONS

ASSIGNMENT = "backprop_ninja"
"""The nbgrader assignment id (a folder under source/, exercises/, solutions/)."""

NOTEBOOK = "backprop_ninja.ipynb"
SOURCE = Path("source") / ASSIGNMENT / NOTEBOOK
RELEASE = Path("exercises") / ASSIGNMENT / NOTEBOOK
SOLUTION = Path("solutions") / ASSIGNMENT / NOTEBOOK
BUGGY = Path("examples") / "buggy" / NOTEBOOK
"""Paths of the course's notebooks, relative to the course root."""

NBGRADER_TIMEOUT = 300.0
"""Seconds one nbgrader command may take."""

BUGGY_ANSWERS: dict[str, str] = {
    # the silent scatter bug: a row used k times receives one update instead of k
    "dC": "dC = torch.zeros_like(C)\ndC[Xb] += demb",
    # the second path overwrites the first instead of adding to it
    "dcounts": (
        "dcounts = counts_sum_inv * dprobs\ndcounts = torch.ones_like(counts) * dcounts_sum"
    ),
    # the biased variance's 1/n where the forward pass uses Bessel's 1/(n-1)
    "dbndiff2": "dbndiff2 = (1.0 / n) * torch.ones_like(bndiff2) * dbnvar",
    # keepdim forgotten: shape (n_hidden,) instead of (1, n_hidden)
    "dbnmeani": "dbnmeani = (-dbndiff).sum(0)",
}
"""The slips of the bundled buggy submission; every other step holds the model answer."""


class BuildError(Exception):
    """nbgrader failed or did not write what the course's configuration asks for."""


# --- the notebook's text and setup cells ---------------------------------------------------

INTRO = f"""\
# Becoming a backprop ninja: Exercise 1

You will backpropagate **by hand** through the character-level MLP of makemore part 4: an
embedding table, a linear layer, batch norm, tanh, a second linear layer and the cross-entropy
loss, written out in small atomic steps. For each of the {len(STEPS)} variables of the forward
pass, from `logprobs` down to the embedding table `C`, you compute the gradient of the loss with
respect to it, one at a time: `dlogprobs`, `dprobs`, ..., `dC`.

**How the notebook works.** The setup cells load the names, build the dataset, initialise the
network from a seeded generator and run the forward pass; `loss.backward()` then stores PyTorch's
own gradients, which the checks compare with yours. Each step has an explanation (the forward line
the gradient flows back through, and its shape), an answer cell where you replace
`raise NotImplementedError()` with code that defines the gradient, and a locked check cell that
prints a line such as

```
dlogprobs       | exact: True  | approximate: True  | maxdiff: 0.0 | shape: True
```

- *exact*: bit for bit equal to autograd. Not required: rounding differs with the order of
  floating-point operations.
- *approximate*: equal up to float32 rounding (`torch.allclose`). This is the one that must be
  `True`.
- *maxdiff*: the largest absolute difference.
- *shape*: your gradient has exactly the shape of its variable. It is compared strictly: a `(64,)`
  where `(1, 64)` is expected is wrong, even though broadcasting would hide it.

**How it is graded.** Each step is graded on its own: the grader runs your answer cell in a fresh
namespace holding the forward tensors and the upstream gradients, supplied by the grader and never
your own earlier answers, so a wrong step costs that step only. It runs under several hidden
configurations: the lecture's tensors, the same tensors with random upstream gradients, other sizes
of every dimension, and batches that use some rows of `C` many times. So:

- never write sizes in by hand (32, 27, 10, 64): use `n`, `vocab_size`, `block_size`, `n_embd`,
  `n_hidden`, or the tensors' shapes;
- write every branch of the chain rule, even where the true gradient happens to be zero
  (`dlogit_maxes`, `db1`): random upstream gradients show a missing or wrong branch;
- do not modify the tensors you read (copy with `.clone()` before an in-place `+=`);
- no autograd in answers (`.grad`, `.backward()`, `torch.autograd`, `requires_grad`,
  `retain_grad`): the gradients must come from your chain rule.

Each step is worth {STEPS[0].points:g} point; run the cells from the top, in order.
"""

SETUP_INTRO = """\
## Setup

Run these cells once. They need only PyTorch and `names.txt`, which is looked for at
`$BACKPROP_NINJA_NAMES` if that is set, then beside this notebook, in `data/` and in the kit's
`data/` folder, and otherwise downloaded.
"""

IMPORTS = """\
import os
import pathlib
import random
import urllib.request

import torch
import torch.nn.functional as F
"""

LOAD_NAMES = f"""\
# names.txt: $BACKPROP_NINJA_NAMES, beside this notebook, in data/, in the kit's data/, or download
NAMES_URL = '{NAMES_URL}'

def find_names():
    candidates = [pathlib.Path('names.txt'), pathlib.Path('data/names.txt'),
                  pathlib.Path('../../data/names.txt')]
    if os.environ.get('BACKPROP_NINJA_NAMES'):
        candidates.insert(0, pathlib.Path(os.environ['BACKPROP_NINJA_NAMES']))
    for path in candidates:
        if path.is_file():
            return path
    print(f'names.txt not found, downloading it from {{NAMES_URL}}')
    try:
        urllib.request.urlretrieve(NAMES_URL, 'names.txt.part')
    except OSError as e:
        raise FileNotFoundError(
            f'could not download names.txt ({{e}}): put a copy beside this notebook') from e
    return pathlib.Path('names.txt.part').replace('names.txt')

names_path = find_names()
words = names_path.read_text().splitlines()
print(len(words), 'names from', names_path)
print(words[:8])
"""

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
Xte,  Yte  = build_dataset(words[n2:])     # 10%
"""

CMP = """\
# utility functions to compare your gradients with PyTorch's
def cmp(s, dt, t):
    if not isinstance(dt, torch.Tensor):
        print(f'{s:15s} | not a tensor: got {type(dt).__name__}, '
              f'expected a tensor of shape {tuple(t.shape)}')
        return
    if dt.shape != t.shape:  # strict: no broadcasting between (1, 64) and (64,)
        print(f'{s:15s} | shape: False (expected {tuple(t.shape)}, got {tuple(dt.shape)})')
        return
    ex = torch.equal(dt, t.grad)
    app = torch.allclose(dt.to(t.grad.dtype), t.grad)
    maxdiff = (dt.to(t.grad.dtype) - t.grad).abs().max().item()
    dtype = '' if dt.dtype == t.grad.dtype else f' | dtype: {dt.dtype} (expected {t.grad.dtype})'
    print(f'{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}'
          f' | shape: True{dtype}')

def cmp_rows(dC, C, Xb):
    # rows of C the batch uses more than once, and whether exactly those rows disagree
    if not isinstance(dC, torch.Tensor) or dC.shape != C.shape:
        return
    uses = torch.bincount(Xb.flatten(), minlength=C.shape[0])
    repeated = set((uses > 1).nonzero().flatten().tolist())
    close = torch.isclose(dC.to(C.grad.dtype), C.grad).all(dim=1)
    wrong = set((~close).nonzero().flatten().tolist())
    if not wrong:
        verdict = 'all rows agree'
    elif wrong == repeated:
        verdict = 'exactly the repeated rows disagree'
    else:
        verdict = 'not only the repeated rows disagree'
    print(f'{"rows of C":15s} | used more than once: {len(repeated)} | disagree: {len(wrong)}'
          f' | {verdict}')
    if wrong and wrong <= repeated:
        print('Only rows that the batch uses several times are wrong: each use of a row must add'
              ' its own share of demb to that row, so accumulate every one of them.')
"""

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
    p.requires_grad = True
"""

BATCH = f"""\
batch_size = {LECTURE.batch_size}
n = batch_size # a shorter variable also, for convenience
# construct a minibatch
ix = torch.randint(0, Xtr.shape[0], (batch_size,), generator=g)
Xb, Yb = Xtr[ix], Ytr[ix] # batch X,Y
"""

FORWARD_INTRO = """\
## The forward pass

"Chunkated" into the small steps that you will backward one at a time. Each line is followed by
the shape of its result. `loss.backward()` at the end stores PyTorch's gradient of every variable
(`t.grad`), which the checks compare with yours.
"""

SECTIONS: dict[str, str] = {
    "emb": "# embedding: look up and concatenate the vectors of the context",
    "hprebn": "# Linear layer 1",
    "bnmeani": "# BatchNorm layer",
    "h": "# Non-linearity",
    "logits": "# Linear layer 2",
    "logit_maxes": "# cross entropy loss (same as F.cross_entropy(logits, Yb))",
}
"""Comments placed before forward lines, as in the lecture."""

STEPS_INTRO = f"""\
## The backward pass, one gradient at a time

From the loss down to the embedding table. Each gradient has exactly the shape of its variable.
Upstream gradients you computed before are there to use (in grading they come from the grader).
There are {len(STEPS)} steps.
"""


# --- cells ------------------------------------------------------------------------------------


def _markdown(cell_id: str, text: str) -> NotebookNode:
    return nbformat.v4.new_markdown_cell(text.rstrip("\n"), id=cell_id)


def _code(cell_id: str, source: str, nbgrader: dict[str, Any] | None = None) -> NotebookNode:
    cell = nbformat.v4.new_code_cell(source.rstrip("\n"), id=cell_id)
    if nbgrader is not None:
        cell.metadata["nbgrader"] = {**nbgrader, "grade_id": cell_id, "schema_version": 3}
    return cell


def _readonly(cell_id: str, source: str) -> NotebookNode:
    """A locked cell: nbgrader restores it from the source when grading, so edits do not count."""
    return _code(cell_id, source, {"grade": False, "solution": False, "locked": True})


def _lecture_size(dim: str) -> int:
    """A symbolic dimension of :data:`catalog.SHAPES` at the lecture's sizes."""
    sizes = LECTURE.sizes()
    return math.prod(int(f) if f.isdigit() else sizes[f] for f in dim.split("*"))


def shape_comment(var: str) -> str:
    """``(n, vocab_size)`` style comment of ``var``'s shape."""
    dims = SHAPES[var]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def lecture_shape(var: str) -> tuple[int, ...]:
    """``var``'s shape at the lecture's sizes, e.g. ``(32, 27)``."""
    return tuple(_lecture_size(d) for d in SHAPES[var])


def forward_source() -> str:
    """The forward pass of :data:`catalog.FORWARD`, then autograd's backward pass."""
    width = max(len(line) for _, line in FORWARD) + 2
    lines = ["# forward pass"]
    for var, line in FORWARD:
        if var in SECTIONS:
            lines.append(SECTIONS[var])
        lines.append(f"{line:<{width}}# {shape_comment(var)}")
    retained = [s.var for s in STEPS if s.var not in PARAMETERS]
    retained += [p for p in PARAMETERS if p not in retained]
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


def step_markdown(step: Step, index: int) -> str:
    """The explanation of a step: heading, teaching text, forward line(s), upstream, shape."""
    lines = "\n".join(step.consumer_lines)
    paths = "line" if len(step.consumer_lines) == 1 else f"{len(step.consumer_lines)} lines"
    upstream = ", ".join(f"`{u}`" for u in step.upstream) or "none (`dloss` is 1)"
    shape = lecture_shape(step.var)
    return (
        f"### Step {index} of {len(STEPS)}: `{step.name}`\n\n"
        f"{step.text}\n\n"
        f"The gradient flows back into `{step.var}` through this {paths} of the forward pass:\n\n"
        f"```python\n{lines}\n```\n\n"
        f"- upstream gradients: {upstream}\n"
        f"- shape of `{step.name}`: `{shape_comment(step.var)}`, the shape of `{step.var}` "
        f"(`{shape}` here)"
    )


def answer_source(step: Step) -> str:
    """The answer cell of the source: the model answer between nbgrader's solution markers."""
    return f"### BEGIN SOLUTION\n{SOLUTIONS[step.name]}\n### END SOLUTION"


def check_source(step: Step) -> str:
    """The grade cell: the hidden test that calls the kit's engine, then the visible check.

    The hidden test comes first so that, under nbgrader's stock ``Execute``, the step's grade
    depends on its own answer only: if an earlier step was left unanswered, this step's answer
    cell may have failed in the kernel and left its variable undefined; the hidden test has
    graded the answer in isolation already, and the visible check then prints "not a tensor"
    instead of raising a ``NameError`` that would zero the cell. Students never see this part.
    """
    visible = f"cmp('{step.name}', {step.name}, {step.var})"
    if step.var == "C":
        visible += f"\ncmp_rows({step.name}, C, Xb)"
    return (
        "### BEGIN HIDDEN TESTS\n"
        "from autograder.incell import check_step\n"
        f'check_step("{step.name}", In[-2])\n'
        f'globals().setdefault("{step.name}", None)\n'
        "### END HIDDEN TESTS\n"
        f"{visible}"
    )


def step_cells(step: Step, index: int) -> list[NotebookNode]:
    """Explanation, answer cell (grade_id = the gradient's name), grade cell (``test_<name>``)."""
    return [
        _markdown(f"explain_{step.name}", step_markdown(step, index)),
        _code(step.name, answer_source(step), {"grade": False, "solution": True, "locked": False}),
        _code(
            step.test_id,
            check_source(step),
            {"grade": True, "solution": False, "locked": True, "points": _points(step)},
        ),
    ]


def _points(step: Step) -> float | int:
    return int(step.points) if float(step.points).is_integer() else step.points


def source_notebook() -> NotebookNode:
    """The nbgrader source notebook of Exercise 1, from the catalog and the model answers."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nb.cells = [
        _markdown("intro", INTRO),
        _markdown("setup", SETUP_INTRO),
        _readonly("setup_imports", IMPORTS),
        _readonly("setup_names", LOAD_NAMES),
        _readonly("setup_dataset", DATASET),
        _readonly("setup_cmp", CMP),
        _readonly("setup_params", PARAMS),
        _readonly("setup_batch", BATCH),
        _markdown("forward_intro", FORWARD_INTRO),
        _readonly("forward", forward_source()),
        _markdown("steps_intro", STEPS_INTRO),
    ]
    for index, step in enumerate(STEPS, start=1):
        nb.cells += step_cells(step, index)
    nbformat.validate(nb)
    return nb


def write_notebook(nb: NotebookNode, path: Path) -> None:
    """Write ``nb`` in nbformat's canonical layout (sorted keys, one-space indent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def write_source(root: Path = REPO_ROOT) -> Path:
    """(Re)write the source notebook under ``root``; returns its path."""
    path = root / SOURCE
    write_notebook(source_notebook(), path)
    return path


# --- nbgrader ------------------------------------------------------------------------------


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``nbgrader ARGS`` in ``course`` (which holds nbgrader_config.py); raise on failure."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    # nbgrader runs the `alembic` script to open its gradebook: find it beside this interpreter
    # even when the environment is not activated.
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bindir, os.environ.get("PATH", "")])}
    try:
        proc = subprocess.run(
            cmd,
            cwd=course,
            env=env,
            capture_output=True,
            text=True,
            timeout=NBGRADER_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"`nbgrader {' '.join(args)}` took over {NBGRADER_TIMEOUT:g} s") from exc
    log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise BuildError(f"`nbgrader {' '.join(args)}` failed ({proc.returncode}):\n{log}")
    if "Exception while loading config file" in log:
        raise BuildError(f"nbgrader could not load {course / 'nbgrader_config.py'}:\n{log}")
    return proc


def generate(course: Path) -> None:
    """``nbgrader generate_assignment`` then ``generate_solution`` in the course root ``course``.

    The assignment goes first: generate_solution looks the assignment up in the gradebook that
    generate_assignment fills. Raises :class:`BuildError` unless both notebooks appear where the
    course's configuration puts them (nbgrader falls back to its defaults, ``release/`` and
    ``source/``, when it cannot read the configuration, and only logs it).
    """
    if not (course / "nbgrader_config.py").is_file():
        raise BuildError(f"{course} has no nbgrader_config.py")
    for command, out in (("generate_assignment", RELEASE), ("generate_solution", SOLUTION)):
        nbgrader(course, command, ASSIGNMENT, "--force")
        if not (course / out).is_file():
            raise BuildError(
                f"`nbgrader {command}` did not write {out}: was {course / 'nbgrader_config.py'} "
                "loaded? It sets the release and solution folders."
            )


def build(root: Path = REPO_ROOT, workdir: Path | None = None) -> list[Path]:
    """Regenerate the course under ``root``: source notebook, exercises, solutions, buggy example.

    nbgrader runs in a copy of the course holding ``root``'s nbgrader_config.py and the source,
    so its gradebook and logs stay out of ``root``: a temporary folder, or ``workdir`` (an empty
    or missing folder, kept afterwards for inspection). Returns the paths written under ``root``.
    """
    written = [write_source(root)]
    with tempfile.TemporaryDirectory(prefix="backprop-ninja-build-") as tmp:
        course = Path(tmp) if workdir is None else workdir
        course.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / "nbgrader_config.py", course / "nbgrader_config.py")
        shutil.copytree(root / SOURCE.parent, course / SOURCE.parent, dirs_exist_ok=True)
        generate(course)
        for rel in (RELEASE, SOLUTION):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(course / rel, root / rel)
            written.append(root / rel)
    written.append(write_buggy_example(root))
    return written


# --- the bundled buggy submission ----------------------------------------------------------


def buggy_notebook(release: NotebookNode) -> NotebookNode:
    """The released notebook filled in as a student might: the model answer for every step
    except those of :data:`BUGGY_ANSWERS`."""
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            name = meta["grade_id"]
            cell.source = BUGGY_ANSWERS.get(name, SOLUTIONS[name])
    return nb


def write_buggy_example(root: Path = REPO_ROOT) -> Path:
    """Write ``examples/buggy/backprop_ninja.ipynb`` from the released notebook under ``root``."""
    release = nbformat.read(str(root / RELEASE), as_version=4)
    path = root / BUGGY
    write_notebook(buggy_notebook(release), path)
    return path


def build_command(args: argparse.Namespace) -> int:
    """``backprop-ninja build``: regenerate source/, exercises/, solutions/, the buggy example."""
    if not (REPO_ROOT / "nbgrader_config.py").is_file():
        print(
            f"backprop-ninja build: {REPO_ROOT} has no nbgrader_config.py; run it in a clone of "
            "the kit (pip install -e .)",
            file=sys.stderr,
        )
        return 1
    try:
        written = build(REPO_ROOT)
    except BuildError as exc:
        print(f"backprop-ninja build: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0

"""The exercise as a value: its forward pass, its steps and its hidden configurations, as data.

An :class:`Exercise` is everything the kit knows about one assignment. The model, the float64
references, the hidden cases, the diagnoses, the notebook cells, the nbgrader ids, the pytest ids
and the reports are all derived from it; the grader, the nbgrader preprocessor, the pytest plugin
and the CLI are handed the exercise of the notebook at hand. A new exercise is a new value (its
lines, steps and text), not a new code path.

**The forward pass** is a tuple of :class:`Line`: one variable each, its source text exactly as
the notebook shows it, and its symbolic shape. The source *is* the operation: the kit evaluates
its own lines (:func:`autograder.core.portable.evaluate`) in a namespace holding the graph so
far, ``torch`` and ``F``, so a line cannot say one thing in the notebook and do another in the
grader.

**A step** asks for the gradient of the loss with respect to one variable ``v``, given the
upstream gradients ``g_c`` of the variables ``c`` that it declares as its *consumers*:

    dv = sum over c in consumers of  (d c / d v)^T g_c

where ``d c / d v`` is the partial derivative of ``c`` with every other consumer held fixed (the
lines between ``v`` and ``c`` are re-evaluated, nothing else). For an atomic pass the consumers
are the lines that read ``v`` directly, and each term is one line's local vector-Jacobian
product; for a fused expression (Exercise 3's batch norm in one line) the consumer is the fused
line's variable. So a step is graded from the upstream gradients alone, never from the student's
own answers to other steps.

Nothing here imports torch: nbgrader loads the kit for every command, and building notebooks
needs only the text.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

ROOT = "loss"
"""The scalar at the top of every graph: its gradient is 1 by definition, never an input."""


@dataclass(frozen=True)
class Config:
    """Sizes of the network and the batch (the lecture's by default)."""

    vocab_size: int = 27
    block_size: int = 3
    n_embd: int = 10
    n_hidden: int = 64
    batch_size: int = 32

    def sizes(self) -> dict[str, int]:
        """The integers a step's namespace holds (``n`` is the batch size, as in the lecture)."""
        return {
            "n": self.batch_size,
            "vocab_size": self.vocab_size,
            "block_size": self.block_size,
            "n_embd": self.n_embd,
            "n_hidden": self.n_hidden,
        }

    def as_dict(self) -> dict[str, int]:
        return {
            "vocab_size": self.vocab_size,
            "block_size": self.block_size,
            "n_embd": self.n_embd,
            "n_hidden": self.n_hidden,
            "batch_size": self.batch_size,
        }

    def words(self) -> str:
        """``vocab_size 29, block_size 5, ...`` for a report's legend."""
        return ", ".join(f"{k} {v}" for k, v in self.sizes().items())


LECTURE = Config()
"""The lecture's sizes: vocab 27, block 3, n_embd 10, n_hidden 64, batch 32."""

SIZES: tuple[str, ...] = ("n", "vocab_size", "block_size", "n_embd", "n_hidden")
"""Integers every step may read; in hidden configurations they take other values."""


def _names(expr: str) -> frozenset[str]:
    return frozenset(
        n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)
    )


@dataclass(frozen=True)
class Line:
    """One line of the forward pass: ``var = expression``, with the shape of ``var``.

    ``shape`` is symbolic, one entry per dimension: a size name (``"n"``), a product of size
    names (``"block_size*n_embd"``) or a literal (``"1"``). ``section`` is the comment the
    notebook prints above the line (``"# BatchNorm layer"``).
    """

    var: str
    source: str
    shape: tuple[str, ...]
    section: str = ""

    def __post_init__(self) -> None:
        target, sep, _ = self.source.partition("=")
        if not sep or target.strip() != self.var:
            raise ValueError(f"line {self.source!r} must assign {self.var}")

    @property
    def expression(self) -> str:
        """The right-hand side of the line."""
        return self.source.partition("=")[2].strip()

    @cached_property
    def reads(self) -> frozenset[str]:
        """Every name the expression reads (variables, sizes, ``torch``, ``F``)."""
        return _names(self.expression)


@dataclass(frozen=True)
class Scatter:
    """A step whose variable is a table read by integer indices (``emb = C[Xb]``): its gradient
    is scattered back, row by row, and a row used k times must receive k contributions.

    ``index`` names the index tensor (``"Xb"``); the reports count how often the batch uses
    each row, and the diagnoses compare the wrong rows with the repeated ones.
    """

    index: str


@dataclass(frozen=True)
class Term:
    """One named part of a step's reference, as an expression over the step's namespace
    (float64 forward tensors, sizes, the upstream gradients, ``torch`` and ``F``).

    A fused formula has one consumer but several parts (softmax and one-hot in the
    cross-entropy's gradient; the direct, mean and variance paths of the batch norm's): the parts
    must add up to the reference (a test checks it), and an answer that leaves one out, flips
    its sign or scales it wrongly is told which part, in ``words``.
    """

    label: str
    expression: str
    words: str


StepKind = Literal["gradient", "training"]


@dataclass(frozen=True)
class Step:
    """One answer the student writes, in one answer cell, graded as one step.

    Attributes:
        name: the gradient's name in the notebook, also the answer cell's nbgrader grade_id.
        var: the forward variable it is the gradient of.
        consumers: the variables whose upstream gradients the step is given; the gradient sums
            one term per consumer (see the module docstring).
        text: what the notebook tells the student, in a teacher's words (markdown).
        answer: the model answer (instructor material: the solution notebook's cell).
        points: nbgrader points of the step.
        scatter: set when the variable is a table read by an index (the dC step).
        terms: the named parts of a fused formula's reference (see :class:`Term`).
        kind: ``"gradient"`` (the default: a vector-Jacobian product, graded in isolation) or
            ``"training"``: the cell updates the parameters, and the step is graded by a short
            training run of every gradient answer of the notebook and this cell, whose losses
            must track training with autograd's gradients (see :mod:`autograder.core.training`).
    """

    name: str
    var: str
    consumers: tuple[str, ...]
    text: str
    answer: str
    points: float = 1.0
    scatter: Scatter | None = None
    terms: tuple[Term, ...] = ()
    kind: StepKind = "gradient"

    @property
    def upstream(self) -> tuple[str, ...]:
        """Upstream gradients the step is given: one per consumer (the loss needs none)."""
        return tuple("d" + c for c in self.consumers if c != ROOT)

    @property
    def test_id(self) -> str:
        """The grade_id of the locked cell that grades this step."""
        return "test_" + self.name


CaseUpstream = Literal["true", "random"]
CaseBatch = Literal["lecture", "random", "repeats"]
CaseShift = Literal["none", "large-logits", "near-constant"]


@dataclass(frozen=True)
class CaseSpec:
    """One hidden configuration, as a recipe (built by :func:`autograder.core.cases.build`).

    Attributes:
        name: stable, short (``"sizes-a"``); reports and JSON key on it.
        words: what it is, for the reports' legend, in an instructor's words.
        config: the sizes.
        upstream: ``"true"`` (autograd's gradients of the loss) or ``"random"`` (independent
            standard normals: a vector-Jacobian product check).
        batch: ``"lecture"`` (the lecture's fixed batch), ``"random"`` or ``"repeats"`` (a batch
            using one row of the table dozens of times, a few several times, many once).
        shift: a change of the parameters that makes one kind of slip show: ``"large-logits"``
            (logits in the hundreds, where a softmax without the max shift overflows) or
            ``"near-constant"`` (features whose batch variance is ~1e-4, where the batch
            norm's 1e-5 matters).
        uses: for a ``repeats`` batch, how often it uses each of its rows (most first).
    """

    name: str
    words: str
    config: Config = LECTURE
    upstream: CaseUpstream = "random"
    batch: CaseBatch = "random"
    shift: CaseShift = "none"
    uses: tuple[int, ...] = ()

    @property
    def lecture_sizes(self) -> bool:
        """The case has the lecture's sizes (hard-coded sizes pass here)."""
        return self.config == LECTURE


@dataclass(frozen=True)
class Text:
    """The words of an exercise's notebook, apart from each step's own text (markdown)."""

    title: str
    intro: str
    steps_intro: str
    forward_intro: str = ""
    outro: str = ""


@dataclass(frozen=True)
class Exercise:
    """One assignment of the kit (see the module docstring).

    Attributes:
        id: the nbgrader assignment id, also the folder under source/, exercises/, solutions/.
        forward: the forward pass, one :class:`Line` per variable, in execution order.
        steps: the gradients asked for, in the order the notebook asks for them.
        cases: the hidden configurations, the first of them the lecture's with the true
            upstream gradients.
        public: the configurations the notebook's own checks use (the lecture's first, with the
            notebook's own tensors); other sizes and draws than the hidden ones.
        text: the notebook's words.
        parameters: trained leaves of the graph; data: integer leaves (the batch).
        sections: forward variables before which the notebook prints a comment.
    """

    id: str
    forward: tuple[Line, ...]
    steps: tuple[Step, ...]
    cases: tuple[CaseSpec, ...]
    text: Text
    public: tuple[CaseSpec, ...] = ()
    parameters: tuple[str, ...] = ("C", "W1", "b1", "W2", "b2", "bngain", "bnbias")
    data: tuple[str, ...] = ("Xb", "Yb")
    sizes: tuple[str, ...] = SIZES
    leaf_shapes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.id}: two steps share a name")
        lines = {line.var for line in self.forward}
        if not self.forward or self.forward[-1].var != ROOT:
            raise ValueError(f"{self.id}: the forward pass must end with {ROOT}")
        for s in self.steps:
            if s.kind == "training":
                continue
            if s.var not in lines and s.var not in self.parameters:
                raise ValueError(f"{self.id}: step {s.name} is the gradient of unknown {s.var}")
            unknown = [c for c in s.consumers if c not in lines]
            if not s.consumers or unknown:
                raise ValueError(f"{self.id}: step {s.name} has bad consumers {s.consumers}")
        if self.cases[0].upstream != "true" or not self.cases[0].lecture_sizes:
            raise ValueError(f"{self.id}: the first case must be the lecture's, true upstream")

    # -- lookups -----------------------------------------------------------------------------

    @cached_property
    def by_name(self) -> dict[str, Step]:
        return {s.name: s for s in self.steps}

    @cached_property
    def by_test_id(self) -> dict[str, Step]:
        return {s.test_id: s for s in self.steps}

    @cached_property
    def lines(self) -> dict[str, Line]:
        return {line.var: line for line in self.forward}

    def step(self, name: str) -> Step:
        """The step called ``name``; KeyError naming the valid names otherwise."""
        try:
            return self.by_name[name]
        except KeyError:
            valid = ", ".join(self.by_name)
            raise KeyError(f"{self.id} has no step {name!r}; its steps are: {valid}") from None

    @property
    def pass_lines(self) -> list[tuple[str, str]]:
        """The forward pass as ``(variable, expression)`` pairs, as the math core reads it."""
        return [(line.var, line.expression) for line in self.forward]

    @property
    def total_points(self) -> float:
        return sum(s.points for s in self.steps)

    @property
    def variables(self) -> tuple[str, ...]:
        """Every float tensor of the graph but the root: parameters and forward variables."""
        return (*self.parameters, *(line.var for line in self.forward if line.var != ROOT))

    # -- the graph's structure ---------------------------------------------------------------

    def path_lines(self, step: Step, consumer: str) -> tuple[str, ...]:
        """The lines the gradient flows back through from ``consumer`` to the step's variable:
        every line on the way that depends on the variable, the step's other consumers held
        fixed (for an atomic pass, only the consumer's own line)."""
        live, held, out = {step.var}, set(step.consumers) - {consumer}, []
        for line in self.forward:
            if line.var not in held and line.reads & live:
                live.add(line.var)
                out.append(line.source)
            if line.var == consumer:
                break
        return tuple(out)

    def consumer_lines(self, step: Step) -> tuple[str, ...]:
        """The lines the gradient flows back through, for every consumer."""
        return tuple(line for c in step.consumers for line in self.path_lines(step, c))

    def readers(self, var: str) -> tuple[str, ...]:
        """The variables whose lines read ``var`` directly."""
        return tuple(line.var for line in self.forward if var in line.reads)

    def shape(self, var: str) -> tuple[str, ...]:
        """Symbolic shape of any tensor of the graph, leaves included."""
        if var in self.lines:
            return self.lines[var].shape
        return self.leaf_shapes[var]

    def concrete_shape(self, var: str, config: Config) -> tuple[int, ...]:
        """``var``'s shape at the sizes of ``config``, e.g. ``(32, 27)``."""
        sizes = config.sizes()
        return tuple(
            math.prod(int(f) if f.isdigit() else sizes[f] for f in dim.split("*"))
            for dim in self.shape(var)
        )

    def shape_words(self, var: str) -> str:
        """``(n, vocab_size)``, the symbolic shape as the notebook writes it."""
        dims = self.shape(var)
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    @property
    def provided(self) -> frozenset[str]:
        """Names a step's namespace may hold: modules, sizes (``batch_size`` too, the lecture's
        name of ``n``), data, parameters, variables and the gradients other steps compute (some
        are its upstream)."""
        gradients = {s.name for s in self.steps} | {u for s in self.steps for u in s.upstream}
        names = {"torch", "F", *self.sizes, "batch_size", *self.data, *self.variables}
        return frozenset(names | gradients)

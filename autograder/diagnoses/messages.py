"""The words of every diagnosis: stable codes and the messages a student reads.

A diagnosis has a stable kebab-case code (``CODES``) and one or two sentences (``TEXT``) saying
what was found, what was expected and how to fix it. Messages never contain reference values or
solution code: they name shapes, variables and ideas (``keepdim``, ``+=``, ``.clone()``, Bessel's
``n-1``), not numbers. The fields a message may name come from the exercise (:func:`fields`).
"""

from __future__ import annotations

from typing import Any

from ..exercises.definition import Exercise, Step
from ..grading.results import Diagnosis

CODES: tuple[str, ...] = (
    *("missing-cell", "not-implemented", "error", "timeout", "not-a-tensor", "shape-mismatch"),
    *("dtype-mismatch", "uses-autograd", "hard-coded-size", "upstream-shortcut"),
    *("ignores-upstream", "missing-branch", "in-place-mutation", "sign-flip", "wrong-scale"),
    *("transposed", "scatter-drops-duplicates", "wrong-value", "tampering"),
    *("update-sign", "update-missing", "update-scale", "update-parameter", "not-reset"),
)
"""Every code :func:`diagnose` gives. They are stable: reports and courses key on them."""

TEXT: dict[str, str] = {
    "timeout": "Your code for {name} did not finish in time (it was stopped after about "
    "{seconds} s); look for a loop that never ends or a very large tensor.",
    "timeout.budget": "Your code for {name} was stopped or not run: this notebook's answers "
    "together used up their time budget. Look for a loop that never ends or a very slow "
    "computation in this step or the ones before it.",
    "no-result": "Your code for {name} could not be run to the end: {problem}.",
    "not-implemented": "{name} is not implemented yet: replace `raise NotImplementedError()` "
    "with your code.",
    "not-implemented.missing": "`{name}` is not answered in this notebook: {problem}.",
    "uses-autograd": "Your code for {name} uses {used}: the point is to derive the gradient by "
    "hand with the chain rule, so no autograd in answers.",
    "tampering": "Your code for {name} reaches into the interpreter or the grader ({used}) "
    "instead of computing the gradient; an answer may only compute with the tensors it is given.",
    "in-place-mutation": "Your code for {name} changed {what} in place, so every later use sees "
    "the changed values. Start from a copy (`.clone()`) before adding to it with `+=`.",
    "one-hot": "`F.one_hot` without `num_classes` makes only as many columns as the largest "
    "index in the batch needs, so its width changes from batch to batch; pass `num_classes` "
    "(the number of columns of `{var}`, read from its shape).",
    "hard-coded-size": "`{name}` is right at the lecture's sizes but {how} when the batch or the "
    "network has other sizes{literals}. Read sizes from `n`, `vocab_size`, `block_size`, "
    "`n_embd`, `n_hidden` or the tensors' `.shape` instead of writing numbers in.",
    "error": "Your code for {name} raised {kind}{where}{detail}.{hint}",
    "error.matmul": " Check the shapes of the two factors of `@`: the gradient has the shape of "
    "`{var}`, and that decides which factor is transposed and in which order.",
    "error.broadcast": " Two tensors' shapes do not broadcast: check which dimension each sum ran "
    "over and whether it kept it (`keepdim`).",
    "error.name": " A step is graded on its own: it sees the forward tensors, the sizes and its "
    "upstream gradients ({ups}), not the other gradients you computed.",
    "error.name-other": " `{missing}` is not one of the names a step sees: the forward tensors, "
    "the sizes (`n`, `vocab_size`, `block_size`, `n_embd`, `n_hidden`), `torch`, `F` and its "
    "upstream gradients ({ups}). Define it in the answer cell itself.",
    "error.name-near": " Did you mean `{near}`?",
    "error.not-reset": " `{name}` is read before it is assigned: a gradient starts afresh "
    "(from zeros, or from its first term) every time; it never carries over from before.",
    "error.import": " The grader loads some modules in advance (torch, numpy, math and the "
    "standard library's pure-Python modules) and an answer cannot load others: keep plotting "
    "(`matplotlib`) and other imports out of the answer cell.",
    "error.memory": " It ran out of memory: an answer may use {limit} beyond the tensors it is "
    "given; look for a very large tensor, or one that grows in a loop.",
    "unassigned": "Your cell never assigns `{name}`; store the gradient in a variable called "
    "`{name}`.",
    "not-a-tensor": "`{name}` should be a torch tensor with the shape of `{var}`, but your code "
    "produced {what}.",
    "transposed": "{found}, and its values are the transpose of the right ones: the factors of "
    "the product are in the wrong order (or one transpose too many). A gradient has its "
    "variable's shape, so order the product to give {want}.",
    "shape.missing-keepdim": "{found}: the sum dropped the dimension it ran over; sum with "
    "`keepdim=True` so the gradient keeps the shape of its variable.",
    "shape.extra-keepdim": "{found}: the sum kept a dimension that the {ndim}-dimensional "
    "`{var}` does not have, so sum without `keepdim` here.",
    "shape.not-summed": "{found}: `{var}` was broadcast along the dimension where it has size 1, "
    "so its gradient sums over that dimension (keeping it).",
    "shape.wrong-dim": "{found}: the sum ran over the wrong dimension; `{var}` was broadcast "
    "along the dimension where it has size 1, so sum over that one.",
    "shape.summed": "{found}: `{var}` was not broadcast in the forward pass, so nothing is summed "
    "over that dimension; keep the full shape.",
    "shape.not-broadcast": "{found}, the shape of `{before}`: the forward pass summed `{var}` over "
    "that dimension, and a sum hands its upstream gradient to every element it summed. Broadcast "
    "the upstream gradient back to the shape of `{var}` (multiply it by ones shaped like `{var}`).",
    "shape.view": "{found}; it still has the shape of `{before}`: the view of the forward pass is "
    "not undone. Reshape to `{var}`'s shape, read from `{var}.shape` rather than written in.",
    "shape.reshaped": "{found}; the numbers are right but arranged in the wrong shape. Reshape to "
    "`{var}`'s shape, read from `{var}.shape` rather than written in.",
    "shape.other": "{found}; a gradient always has exactly the shape of its variable. Check which "
    "dimensions each sum ran over and the order of the factors of each product.",
    "shape.sizes": "{found} when the batch or the network has other sizes (at the lecture's "
    "sizes the shape is right): read sizes from `n`, `vocab_size`, `block_size`, `n_embd`, "
    "`n_hidden` or the tensors' `.shape` instead of writing numbers in.",
    "shape.cmp": " The lecture's `cmp` would broadcast the two and call it right, but a gradient "
    "must have exactly its variable's shape.",
    "scatter-drops-duplicates": "dC is right on every row of C the batch uses once and wrong on "
    "exactly the rows it uses several times: an indexed `+=` with repeated indices (or `=` in a "
    "loop) keeps only one of the updates. Accumulate every use, with a loop over the batch that "
    "adds each row's share, or a scatter-add such as `index_add_`.",
    "sign-flip": "`{name}` has the right magnitude everywhere but the opposite sign: a minus sign "
    "is missing or doubled in the local derivative of {lines}.",
    "sign-flip.use": "`dC` has the wrong sign for {path}: check the sign there.",
    "sign-flip.branch": "The contribution to `{name}` through {path} has the wrong sign, while "
    "the other path is right: check the sign of that local derivative.",
    "missing-branch": "`{name}` holds only part of the gradient: the path through {path} is "
    "missing. `{var}` is used by {lines}; add every path's contribution (`+=`, not `=`).",
    "missing-branch.use": "`dC` misses the uses of `C` by {path}: every position of every "
    "example sends its row of `demb` back into `C`, so the loops must cover all of them.",
    "wrong-scale": "`{name}` is {scale}.",
    "wrong-scale.missing-factor": "`{name}` lacks a factor: multiplied by `{factor}` it would "
    "be right. Check the local derivative of {lines} for the `{factor}` it needs.",
    "wrong-scale.extra-factor": "`{name}` has a factor too many: divided by `{factor}` it would "
    "be right. Check where `{factor}` enters the local derivative of {lines}.",
    "wrong-scale.term": "In `{name}`, {term} is {scale}; the other parts are right.",
    "missing-branch.term": "`{name}` misses {term}; the gradient has several parts, and all of "
    "them must be in it.",
    "sign-flip.term": "In `{name}`, {term} has the wrong sign; the other parts are right.",
    "wrong-scale.branch": "The contribution to `{name}` through {path} is {scale}; the other path "
    "is right.",
    "scale.bessel": "too small by the factor (n-1)/n: the variance uses Bessel's correction, so "
    "divide by `n-1`, not by `n`",
    "scale.bessel-inverse": "too large by the factor n/(n-1): this line divides by `n`, not `n-1`",
    "scale.missing-1/n": "`n` times too large: a factor `1/n` is missing (a mean divides by `n`)",
    "scale.extra-1/n": "`n` times too small: there is one `1/n` too many (no mean on this path)",
    "scale.missing-1/(n-1)": "`n-1` times too large: the variance's factor `1/(n-1)` is missing",
    "scale.double": "twice too large: a factor 2 is counted twice, or a contribution added twice",
    "scale.half": "half the right size: a factor 2 is missing (the derivative of `x**2` is `2*x`)",
    "scale.constant": "off by a constant factor: check every constant in the local derivative",
    "upstream-shortcut": "`{name}` is right at the true upstream gradient of this loss but wrong "
    "when the grader passes other upstream gradients. Write the chain rule itself: {chain}.",
    "upstream-shortcut.branch": "`{name}` is right at the true upstream gradient, where the "
    "path through {path} carries almost nothing, and wrong wherever that path matters: re-derive "
    "its local derivative, the other path is right.",
    "upstream-shortcut.zero": "`{name}` is all zeros: close to the true gradient here, which "
    "cancels to almost nothing, but wrong when the grader passes other upstream gradients. Write "
    "the chain rule itself: {chain}.",
    "ignores-upstream": "`{name}` comes out the same whatever {ups} holds, so it cannot be the "
    "chain rule: {chain}.",
    "wrong-value": "`{name}` has the right shape but wrong values, and no single slip explains "
    "them: re-derive {chain}.",
    "wrong-value.epsilon": "`{name}` is right everywhere except where the batch's features are "
    "nearly constant (variance about 1e-4), where the batch norm's `1e-5` matters: keep "
    "`+ 1e-5` exactly where the forward pass has it.",
    "wrong-value.overflow": "`{name}` is right except where the logits are large (in the "
    "hundreds): there `exp` overflows to `inf`, or probabilities underflow to 0 and dividing by "
    "them gives `nan`. Subtract each row's maximum before exponentiating (as `F.softmax` "
    "does), which changes nothing mathematically, and do not divide by the probabilities.",
    "not-reset": "`{name}` reads its own value from before the cell ran: in the training loop "
    "that is the previous iteration's gradient, so it piles up. A gradient starts afresh (from "
    "zeros, or from its first term) every time.",
    "training.error": "Training with your cells stopped with {kind}{detail}: run the cells "
    "above one by one to find the one that raises it.",
    "training.upstream": "Training with your cells cannot match training with autograd while "
    "{failed} {verb} wrong: fix {them} first.",
    "training.no-update": "`{name}` leaves the parameters as they are (the losses are those of "
    "no training at all): change each parameter in place (`p.data += ...`), not a copy of it.",
    "training.sign": "`{name}` moves the parameters up the gradient, so the loss grows: subtract "
    "the learning rate times the gradient.",
    "training.scale": "`{name}` takes steps of the wrong size: subtract exactly `lr` times each "
    "gradient.",
    "training.parameters": "`{name}` does not take the step `-lr * grad` for every parameter "
    "(in one update from known values, {parts}): update each parameter with its own gradient, "
    "once, in place.",
    "training.part.none": "not updated",
    "training.part.sign": "moved up the gradient",
    "training.part.size": "a step of the wrong size",
    "training.part.other": "moved by something other than `lr` times the gradient",
    "training.diverges": "Training with your cells gives other losses than training with "
    "autograd's gradients: check that each parameter is updated with its own gradient "
    "(`parameters` and `grads` in the same order), in place, once per iteration.",
    "dtype-mismatch": "`{name}` is {dtype} while `{var}` is float32; the values are graded all "
    "the same, but a gradient normally keeps its variable's dtype.",
}
"""The messages, by code or ``code.variant``; fields are filled in by :func:`say`."""


ALIASES = {
    "training.error": "error",
    "training.upstream": "wrong-value",
    "training.no-update": "update-missing",
    "training.sign": "update-sign",
    "training.scale": "update-scale",
    "training.parameters": "update-parameter",
    "training.diverges": "wrong-value",
    "one-hot": "hard-coded-size",
    "no-result": "error",
    "unassigned": "error",
    "shape": "shape-mismatch",
}
"""Message keys whose code is not their first part."""


def fields(ex: Exercise, step: Step) -> dict[str, str]:
    """What every message of a step may name: the step, its variable, lines and upstreams."""
    consumer_lines = ex.consumer_lines(step)
    lines = " and ".join(f"`{line}`" for line in consumer_lines)
    ups = " and ".join(f"`{u}`" for u in step.upstream) or "the upstream gradient"
    if not step.upstream:
        chain = f"the derivative of {lines}"
    elif len(step.consumers) == 1:
        chain = f"the local derivative of {lines} times {ups}"
    else:
        chain = (
            f"for each of {lines}, the local derivative times that line's upstream "
            f"gradient ({', '.join(f'`{u}`' for u in step.upstream)}), summed"
        )
    return {"name": step.name, "var": step.var, "lines": lines, "ups": ups, "chain": chain}


def say(ex: Exercise, step: Step, key: str, **values: Any) -> Diagnosis:
    """The diagnosis ``TEXT[key]`` for ``step``; its code is ``key`` up to the first dot, or
    what ``ALIASES`` says."""
    family = key.split(".")[0]
    code = ALIASES.get(key) or ALIASES.get(family) or family
    return Diagnosis(code, TEXT[key].format(**{**fields(ex, step), **values}))


def hint(ex: Exercise, step: Step, key: str, **values: Any) -> str:
    """A message part (``error.matmul`` ...) filled in for ``step``."""
    return TEXT[key].format(**{**fields(ex, step), **values})


def path_of(ex: Exercise, step: Step, consumer: str) -> str:
    """The consumer's forward line, quoted, for "the path through ..."."""
    return f"`{ex.lines[consumer].source}`"

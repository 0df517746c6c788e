"""The notebook's checks: each step judged the way the grader judges it, before it is submitted.

A released notebook carries this module's notebook part verbatim in a locked cell, after the
source of :mod:`autograder.core.portable` (so it needs only torch), with the exercise as data
(:func:`exercise_spec`). ``CHECKS.check("dcounts")`` then:

1. finds the code of the step's answer as the student last ran it: the latest executed cell
   (IPython's ``In``) that assigns the gradient;
2. runs it in a fresh namespace per configuration, holding only what the grader gives the step:
   the forward tensors, the sizes, ``torch``, ``F`` and the step's upstream gradients, the true
   ones from autograd for the lecture's tensors, so one wrong step never spoils a later check;
3. compares each result with the reference, strictly by shape and within the grader's tolerance,
   on the lecture's tensors and on public configurations (random upstream gradients, other
   sizes, a batch reusing rows of C, nearly constant features: other draws than the grader's);
4. prints the lecture's line as the lecture's ``cmp`` does, which configurations failed, and
   for a wrong step a diagnosis with the grader's code and words, then raises ``AssertionError``
   (not under ``nbgrader autograde``, where the hidden tests decide the points).

Every message is the kit's own (:mod:`autograder.diagnoses.messages`), carried as data.

Why one module of this length: its notebook part is carried verbatim in one locked cell, so it
must be self-contained source, and the grader-side helpers that prepare its data sit beside the
code that reads it.
"""

from __future__ import annotations

import ast
import os
import textwrap
import types
from typing import Any

import torch

from ..core.portable import (
    FLOOR,
    as64,
    autograd_gradients,
    autograd_training,
    bound_names,
    broadcast_shape,
    carries_over,
    close,
    evaluate,
    factor_name,
    fit_factor,
    grouped_updates,
    init_params,
    maxabs,
    own_functions,
    partial_vjp,
    repeats_batch,
    run_forward,
    shape_slip,
    tamper_names,
    to_float64,
    training_program,
    transposed_match,
    without_harmless_autograd,
    wrong_rows,
    wrong_updates,
)

# --- the notebook's part ---


def _assigns(source: str, name: str) -> bool:
    """Whether a cell's code assigns ``name`` (IPython's ``%`` and ``!`` lines left out)."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
    return False


def _words(source: str, attributes_only: bool = False) -> set[str]:
    """The names and attribute names a piece of code mentions (comments and strings left out);
    with ``attributes_only``, only the names after a dot."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif attributes_only:
            continue
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
    return found


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


class Checks:
    """The checks of one notebook (see the module docstring); ``notebook`` is its globals."""

    def __init__(self, spec: dict[str, Any], notebook: dict[str, Any]) -> None:
        self.spec = spec
        self.nb = notebook
        self._configs: list[dict[str, Any]] | None = None
        self.lines = [tuple(pair) for pair in spec["forward"]]

    # -- the configurations -------------------------------------------------------------------

    def configurations(self) -> list[dict[str, Any]]:
        """Built once, at the first check: graphs, upstream gradients, autograd's gradients."""
        if self._configs is None:
            g = torch.Generator().manual_seed(self.spec["seed"])
            self._configs = [self._build(c, g) for c in self.spec["configs"]]
        return self._configs

    def _build(self, config: dict[str, Any], g: torch.Generator) -> dict[str, Any]:
        spec = self.spec
        if config["batch"] == "lecture":
            params = {k: self.nb[k].detach().clone().float() for k in spec["parameters"]}
            Xb, Yb = self.nb["Xb"], self.nb["Yb"]
        else:
            sizes = types.SimpleNamespace(**config["sizes"])
            params = init_params(sizes, g)
            n, block = config["sizes"]["batch_size"], config["sizes"]["block_size"]
            vocab = config["sizes"]["vocab_size"]
            if config["batch"] == "repeats":
                Xb = repeats_batch(vocab, n, block, config["uses"], g)
            else:
                Xb = torch.randint(0, vocab, (n, block), generator=g)
            Yb = torch.randint(0, vocab, (n,), generator=g)
        if config["shift"] == "near-constant":
            params["W1"] = params["W1"] * spec["near_constant_scale"]
        if config["shift"] == "large-logits":
            params["W2"] = params["W2"] * spec["large_logits_scale"]
            params["b2"] = params["b2"] * spec["large_logits_scale"]
        graph = run_forward(self.lines, params, Xb, Yb)
        exact = autograd_gradients(self.lines, graph, spec["parameters"], spec["variables"])
        training = spec.get("training")
        if training:  # the batches of a short training run (the notebook's own data if it can)
            k, sizes = training["steps"], config["sizes"]
            n, block, vocab = sizes["batch_size"], sizes["block_size"], sizes["vocab_size"]
            if config["batch"] == "lecture" and "Xtr" in self.nb:
                rows = torch.randint(0, self.nb["Xtr"].shape[0], (k, n), generator=g)
                graph["Xbs"], graph["Ybs"] = self.nb["Xtr"][rows], self.nb["Ytr"][rows]
            else:
                graph["Xbs"] = torch.randint(0, vocab, (k, n, block), generator=g)
                graph["Ybs"] = torch.randint(0, vocab, (k, n), generator=g)
            graph["lr"] = training["lr"]
        if config["upstream"] == "true":
            upstream = exact
        else:
            upstream = {
                "d" + k: torch.randn(graph[k].shape, generator=g) for k in spec["variables"]
            }
        return {
            **config,
            "graph": graph,
            "graph64": to_float64(graph),
            "upstream": upstream,
            "exact": exact,
            "references": {},
        }

    def terms(self, config: dict[str, Any], name: str) -> dict[str, torch.Tensor]:
        """The reference's chain-rule terms, one per consumer (float64, cached)."""
        if name not in config["references"]:
            step = self.spec["steps"][name]
            terms = {}
            if step["kind"] == "training":
                g = config["graph"]
                params = {k: g[k] for k in self.spec["parameters"]}
                terms["run"] = autograd_training(self.lines, params, g["Xbs"], g["Ybs"], g["lr"])
            for consumer in step["consumers"]:
                held = set(step["consumers"]) - {consumer}
                if consumer == self.spec["root"]:
                    up = torch.ones((), dtype=torch.float64)
                else:
                    up = config["upstream"]["d" + consumer].double()
                terms[consumer] = partial_vjp(
                    self.lines, config["graph64"], step["var"], held, consumer, up
                )
            config["references"][name] = terms
        return config["references"][name]

    def reference(self, config: dict[str, Any], name: str) -> torch.Tensor:
        terms = list(self.terms(config, name).values())
        return torch.stack(terms).sum(0) if len(terms) > 1 else terms[0]

    def parts(self, config: dict[str, Any], name: str) -> dict[str, torch.Tensor]:
        """A fused formula's named parts (the step's terms), else its consumers' terms."""
        step = self.spec["steps"][name]
        if not step["terms"]:
            return self.terms(config, name) if len(step["consumers"]) > 1 else {}
        namespace = {**config["graph64"]}
        namespace.update({k: v.double() for k, v in config["upstream"].items()})
        shape = self.reference(config, name).shape
        return {
            label: torch.broadcast_to(evaluate(expression, namespace), shape)
            for label, expression, _ in step["terms"]
        }

    # -- running one answer ---------------------------------------------------------------------

    def answer_code(self, name: str) -> str | None:
        """The latest executed cell that assigns ``name`` (this check cell excluded); for a
        training step, the training run built from every gradient cell and the latest cell that
        updates the parameters: it assigns no gradient and names ``lr`` (``C.data -= lr * dC``)
        or ``parameters`` and ``grads``, or it is still the step's stub."""
        history = [s for s in (self.nb.get("In") or self.nb.get("_ih") or [])[:-1]]
        step = self.spec["steps"][name]
        if step["kind"] == "training":
            training = self.spec["training"]

            def updates(s: object) -> bool:
                if not isinstance(s, str) or "CHECKS." in s:
                    return False
                if any(_assigns(s, g) for g in training["cells"]):
                    return False
                words = _words(s)
                stub = "NotImplementedError" in words and f"{name}:" in s
                return "lr" in words or {"parameters", "grads"} <= words or stub

            update = next((s for s in reversed(history) if updates(s)), None)
            if update is None:
                return None
            cells = [
                self.answer_code(g) or f'raise NotImplementedError("no {g}")'
                for g in training["cells"]
            ]
            grads = ["d" + p for p in self.spec["parameters"]]
            return training_program(self.lines, cells, update, self.spec["parameters"], grads, name)
        for source in reversed(history):
            if isinstance(source, str) and _assigns(source, name):
                return source
        return None

    def run(self, code: str, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """Run ``code`` in a fresh namespace of ``config``: what came out, and what changed."""
        step = self.spec["steps"][name]
        pristine = {k: v for k, v in config["graph"].items() if k != self.spec["root"]}
        for up in step["upstream"]:
            pristine[up] = config["upstream"][up]
        given = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in pristine.items()}
        ns: dict[str, Any] = {"torch": torch, "F": torch.nn.functional, **given}
        out: dict[str, Any] = {"kind": "tensor", "tensor": None}
        try:
            with torch.no_grad():
                exec(compile(code, "<your answer>", "exec", dont_inherit=True), ns)
            value = ns.get(name, ns)
            if value is ns:
                out["kind"] = "missing"
            elif isinstance(value, torch.Tensor):
                out["tensor"] = value.detach().clone()
                out["autograd"] = value.requires_grad or value.grad_fn is not None
            else:
                out.update(kind="other", type_name=type(value).__name__)
        except NotImplementedError:
            out["kind"] = "not-implemented"
        except Exception as e:
            tb, line = e.__traceback__, None
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == "<your answer>":
                    line = tb.tb_lineno
                tb = tb.tb_next
            out.update(kind="error", error=f"{type(e).__name__}: {e}"[:300], lineno=line)
        out["mutated"] = [
            k
            for k, v in given.items()
            if isinstance(v, torch.Tensor) and not torch.equal(v, pristine[k])
        ]
        return out

    def judge(self, out: dict[str, Any], name: str, config: dict[str, Any]) -> dict[str, Any]:
        """Pass or fail one configuration: strict shape, then the grader's tolerance."""
        ref = self.reference(config, name)
        mags = [maxabs(ref)] + [
            maxabs(config["upstream"][u]) for u in self.spec["steps"][name]["upstream"]
        ]
        tol = self.spec["rtol"] * max(*mags, 1e-12)
        verdict = {"config": config, "ref": ref, "tol": tol, "passed": False, "maxdiff": None}
        t = out.get("tensor")
        if out["kind"] != "tensor" or t is None:
            verdict["status"] = out["kind"]
        elif tuple(t.shape) != tuple(ref.shape):
            verdict["status"] = "shape"
        else:
            diff = maxabs(as64(t) - ref) if t.numel() else 0.0
            verdict.update(status="values", maxdiff=diff, passed=diff <= tol)
        return verdict

    # -- the check ---------------------------------------------------------------------------

    def check(self, name: str) -> None:
        """Check step ``name``: print the verdict and raise AssertionError if it is wrong."""
        __tracebackhide__ = True  # IPython shows the assertion, not the checks' own frames
        code = self.answer_code(name)
        if code is None:
            print(f"{name:15s} | no cell that assigns {name} has been run yet")
            if not self.deciding:
                raise AssertionError(f"{name}: run your answer cell first, then this check.")
            return
        configs = self.configurations()
        outs = [self.run(code, name, c) for c in configs]
        verdicts = [self.judge(o, name, c) for o, c in zip(outs, configs, strict=True)]
        self._print(name, code, outs, verdicts)
        found = self.diagnose(name, code, outs, verdicts)
        if found is None:
            return
        code_, message = found
        for line in textwrap.wrap(f"[{code_}] {message}", 96, subsequent_indent="    "):
            print(line)
        if not self.deciding:
            raise AssertionError(f"{name} is not right yet: [{code_}] {message}")

    def train(self, name: str, steps: int, batch_size: int = 32) -> dict[str, torch.Tensor]:
        """Train the notebook's network from its initial parameters for ``steps`` iterations with
        the student's cells (the program of training step ``name``), on batches of the
        training set; print the loss as it goes and return the trained parameters."""
        code = self.answer_code(name)
        if code is None:
            raise AssertionError(f"{name}: run your cells and their checks first.")
        g = torch.Generator().manual_seed(self.spec["seed"] + 1)
        rows = torch.randint(0, self.nb["Xtr"].shape[0], (steps, batch_size), generator=g)
        params = {k: self.nb[k].detach().clone().float() for k in self.spec["parameters"]}
        ns: dict[str, Any] = {"torch": torch, "F": torch.nn.functional, **params}
        ns.update(n=batch_size, batch_size=batch_size, vocab_size=params["C"].shape[0])
        ns.update(n_embd=params["C"].shape[1])
        ns.update(block_size=self.nb["Xtr"].shape[1], n_hidden=params["W1"].shape[1])
        ns.update(
            Xbs=self.nb["Xtr"][rows], Ybs=self.nb["Ytr"][rows], lr=self.spec["training"]["lr"]
        )
        with torch.no_grad():
            exec(compile(code, "<your cells>", "exec", dont_inherit=True), ns)
        losses = ns["_losses"]  # the loss before each update (the outcome holds the probe too)
        for i in range(0, steps, max(1, steps // 10)):
            print(f"{i:6d}/{steps}: loss {float(losses[i]):.4f}")
        print(f"{steps:6d}/{steps}: loss {float(losses[-1]):.4f}")
        return {k: ns[k] for k in self.spec["parameters"]}

    @property
    def deciding(self) -> bool:
        """Under ``nbgrader autograde`` the hidden tests decide the points: checks only print."""
        return os.environ.get("NBGRADER_EXECUTION") == "autograde"

    def _print(self, name: str, code: str, outs: list, verdicts: list) -> None:
        first, lecture = verdicts[0], verdicts[0]["config"]
        t = outs[0].get("tensor")
        if self.spec["steps"][name]["kind"] == "training" and first["status"] == "values":
            print(
                f"{name:15s} | training with your cells: losses and one update within "
                f"{first['maxdiff']:.3g} of autograd's ({self.spec['training']['steps']} "
                f"iterations) | approximate: {first['passed']}"
            )
        elif first["status"] == "values":
            exact = bool(torch.equal(t, lecture["exact"][name])) if t is not None else False
            approx = first["passed"]
            print(
                f"{name:15s} | exact: {exact!s:5s} | approximate: {approx!s:5s} | "
                f"maxdiff: {first['maxdiff']:.3g} | shape: True"
            )
        elif first["status"] == "shape":
            print(
                f"{name:15s} | shape: False (expected {_shape(first['ref'].shape)}, "
                f"got {_shape(t.shape)})"
            )
        else:
            print(f"{name:15s} | no tensor on the lecture's tensors ({outs[0]['kind']})")
        failed = [v["config"]["name"] for v in verdicts[1:] if not v["passed"]]
        others = ", ".join(v["config"]["name"] for v in verdicts[1:])
        if failed and len(failed) == len(verdicts) - 1:
            print(f"{'':15s} | other configurations: all failed ({others})")
        elif failed:
            print(f"{'':15s} | other configurations: failed on {', '.join(failed)} (of {others})")
        else:
            print(f"{'':15s} | other configurations: all passed ({others})")
        step = self.spec["steps"][name]
        if step["scatter"] is not None:
            self._print_rows(name, step, outs, verdicts)

    def _print_rows(self, name: str, step: dict, outs: list, verdicts: list) -> None:
        for out, v in zip(outs, verdicts, strict=True):
            config = v["config"]
            if config["batch"] != "repeats" or v["status"] != "values":
                continue
            uses = torch.bincount(
                config["graph"][step["scatter"]].flatten(), minlength=v["ref"].shape[0]
            )
            wrong, repeated = wrong_rows(out["tensor"], v["ref"], uses, v["tol"])
            if not wrong:
                verdict = "all rows agree"
            elif wrong <= repeated:
                verdict = "only rows used more than once disagree"
            else:
                verdict = "rows used once disagree too"
            print(
                f"{'rows of ' + step['var']:15s} | {config['name']}: used more than once: "
                f"{len(repeated)} | disagree: {len(wrong)} | {verdict}"
            )

    # -- diagnoses (the grader's, where the notebook can tell) ------------------------------------

    def say(self, name: str, key: str, **values: Any) -> tuple[str, str]:
        family = key.split(".")[0]
        aliases = self.spec["aliases"]
        code = aliases.get(key) or aliases.get(family) or family
        fields = {**self.spec["steps"][name]["fields"], **values}
        return code, self.spec["messages"][key].format(**fields)

    def diagnose(self, name: str, code: str, outs: list, verdicts: list) -> tuple[str, str] | None:
        """The grader's first diagnosis where the notebook can compute it; None when right."""
        step = self.spec["steps"][name]
        plain = without_harmless_autograd(code)  # `p.grad = None` uses nothing of autograd
        words = _words(plain)
        if all(o["kind"] == "not-implemented" for o in outs):
            return self.say(name, "not-implemented")
        attributes = _words(plain, attributes_only=True) - own_functions(code)
        own = bound_names(code)  # the code's own variables (a temporary called `backward`)
        used = [
            w
            for w in self.spec["autograd_names"]
            if w in attributes or (w in words and w not in own)
        ]
        used += [w for w in self.spec["autograd_attributes"] if w in attributes]
        if used or any(o.get("autograd") for o in outs):
            names = ", ".join(f"`{w}`" for w in used) or "autograd"
            return self.say(name, "uses-autograd", used=names)
        passed = all(v["passed"] for v in verdicts)
        tampered = tamper_names(code)
        if tampered and passed:  # else what went wrong comes first
            return self.say(name, "tampering", used=", ".join(f"`{w}`" for w in tampered))
        if self.spec.get("training") and step["kind"] == "gradient" and passed:
            if carries_over(code, name):  # its cell runs again every iteration of training
                return self.say(name, "not-reset")
        known = set(verdicts[0]["config"]["graph"]) | set(step["upstream"])
        mutated = sorted({m for o in outs for m in o["mutated"] if m in known})
        if mutated and step["kind"] != "training":
            return self.say(name, "in-place-mutation", what=", ".join(f"`{m}`" for m in mutated))
        if all(v["passed"] for v in verdicts):
            return None
        if step["kind"] == "training":
            return self._training(name, outs, verdicts)
        return (
            self._sizes(name, code, outs, verdicts)
            or self._no_tensor(name, outs)
            or self._wrong_shape(name, outs, verdicts)
            or self._shifted(name, verdicts)
            or self._values(name, outs, verdicts)
        )

    def _sizes(self, name: str, code: str, outs: list, verdicts: list) -> tuple | None:
        lecture_ok = all(v["passed"] for v in verdicts if v["config"]["lecture_sizes"])
        plain_bad = [
            v
            for v in verdicts
            if not v["config"]["lecture_sizes"]
            and not v["passed"]
            and v["config"]["shift"] == "none"
        ]
        if "one_hot" in _words(code) and "num_classes" not in _words(code) and not lecture_ok:
            return self.say(name, "one-hot")
        if not lecture_ok or not plain_bad:
            return None
        i = verdicts.index(plain_bad[0])
        out = outs[i]
        if out["kind"] == "error":
            how = f"raised {out['error'].split(':')[0]}"
            how += f" on line {out['lineno']}" if out.get("lineno") else ""
        else:
            how = "has the wrong shape" if plain_bad[0]["status"] == "shape" else "has wrong values"
        literals = []
        try:
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Constant) and type(node.value) is int:
                    meaning = self.spec["lecture_sizes"].get(str(node.value))
                    if meaning and (node.value, meaning) not in literals:
                        literals.append((node.value, meaning))
        except SyntaxError:
            pass
        found = ", ".join(f"{v} for `{m}`" for v, m in literals)
        return self.say(
            name,
            "hard-coded-size",
            how=how,
            literals=f" (your code writes {found})" if found else "",
        )

    def _no_tensor(self, name: str, outs: list) -> tuple | None:
        for o in outs:
            if o["kind"] == "error":
                kind, _, detail = o["error"].partition(": ")
                where = f" on line {o['lineno']} of your cell" if o.get("lineno") else ""
                hint = ""
                if "cannot be multiplied" in o["error"]:
                    hint = self.say(name, "error.matmul")[1]
                elif "must match the size" in o["error"] or "broadcast shape" in o["error"]:
                    hint = self.say(name, "error.broadcast")[1]
                elif kind == "NameError":
                    missing = detail.split("'")[1] if detail.count("'") >= 2 else "that name"
                    if missing == name:
                        hint = self.say(name, "error.not-reset")[1]
                    elif missing in self.spec["steps"]:
                        hint = self.say(name, "error.name")[1]
                    else:
                        hint = self.say(name, "error.name-other", missing=missing)[1]
                return self.say(
                    name,
                    "error",
                    kind=kind,
                    where=where,
                    detail=f" ({detail})" if detail else "",
                    hint=hint,
                )
        for o in outs:
            if o["kind"] == "missing":
                return self.say(name, "unassigned")
            if o["kind"] == "other":
                return self.say(name, "not-a-tensor", what=f"a `{o['type_name']}`")
        return None

    def _wrong_shape(self, name: str, outs: list, verdicts: list) -> tuple | None:
        bad = [(o, v) for o, v in zip(outs, verdicts, strict=True) if v["status"] == "shape"]
        if not bad:
            return None
        out, v = bad[0]
        step = self.spec["steps"][name]
        got, want = out["tensor"], v["ref"]
        found = (
            f"`{name}` has shape {_shape(got.shape)} but `{step['var']}` has shape "
            f"{_shape(want.shape)}"
        )
        if all(transposed_match(o["tensor"], x["ref"], x["tol"]) for o, x in bad):
            return self.say(name, "transposed", found=found, want=_shape(want.shape))
        if not v["config"]["lecture_sizes"]:
            return self.say(name, "shape.sizes", found=found)
        slip = shape_slip(got.shape, want.shape)
        graph = v["config"]["graph"]
        before = next((c for c in step["consumers"] if graph[c].shape == got.shape), None)
        if slip == "reshaped":
            slip = "view" if before is not None else "reshaped"
        return self.say(name, f"shape.{slip}", found=found, ndim=want.dim(), before=before)

    def _shifted(self, name: str, verdicts: list) -> tuple | None:
        shifts = {v["config"]["shift"] for v in verdicts if not v["passed"]}
        if len(shifts) != 1 or "none" in shifts:
            return None
        key = {"near-constant": "wrong-value.epsilon", "large-logits": "wrong-value.overflow"}
        return self.say(name, key[shifts.pop()])

    def _training(self, name: str, outs: list, verdicts: list) -> tuple[str, str]:
        failed = []
        for cell in self.spec["training"]["cells"]:
            code = self.answer_code(cell)
            config = self.configurations()[0]
            out = self.run(code, cell, config) if code else {"kind": "missing"}
            if not self.judge(out, cell, config)["passed"]:
                failed.append(cell)
        if failed:
            one = len(failed) == 1
            names = ", ".join(f"`{f}`" for f in failed)
            verb, them = ("is", "it") if one else ("are", "them")
            return self.say(name, "training.upstream", failed=names, verb=verb, them=them)
        for o in outs:
            if o["kind"] in ("error", "not-implemented"):
                kind, _, detail = o.get("error", "NotImplementedError").partition(": ")
                return self.say(
                    name, "training.error", kind=kind, detail=f" ({detail})" * bool(detail)
                )
        for key, factor in (
            ("training.no-update", 0.0),
            ("training.sign", -1.0),
            ("training.scale", 2.0),
            ("training.scale", 0.5),
        ):
            matches = True
            for o, v in zip(outs, verdicts, strict=True):
                if v["passed"]:
                    continue
                g = v["config"]["graph"]
                params = {k: g[k] for k in self.spec["parameters"]}
                run = autograd_training(self.lines, params, g["Xbs"], g["Ybs"], factor * g["lr"])
                t = o.get("tensor")
                matches = (
                    matches
                    and t is not None
                    and t.shape == run.shape
                    and (maxabs(as64(t) - run) <= v["tol"])
                )
            if matches:
                return self.say(name, key)
        for o, v in zip(outs, verdicts, strict=True):
            t = o.get("tensor")
            if v["passed"] or t is None:
                continue
            g = v["config"]["graph"]
            params = {k: g[k] for k in self.spec["parameters"]}
            wrong = wrong_updates(t, params, g["lr"], v["tol"])
            if wrong:
                words = {h: self.spec["messages"][f"training.part.{h}"] for h in wrong.values()}
                parts = grouped_updates(wrong, words)
                return self.say(name, "training.parameters", parts=parts)
        return self.say(name, "training.diverges")

    def _values(self, name: str, outs: list, verdicts: list) -> tuple[str, str]:
        step = self.spec["steps"][name]
        failing = [(o["tensor"], v) for o, v in zip(outs, verdicts, strict=True) if not v["passed"]]
        if step["scatter"] is not None:
            scattered = True
            for t, v in failing:
                graph = v["config"]["graph"]
                uses = torch.bincount(graph[step["scatter"]].flatten(), minlength=v["ref"].shape[0])
                wrong, repeated = wrong_rows(t, v["ref"], uses, v["tol"])
                scattered = scattered and bool(wrong) and wrong <= repeated
            if scattered:
                return self.say(name, "scatter-drops-duplicates")
        whole = [fit_factor(t, v["ref"], v["tol"]) for t, v in failing]
        if all(f is not None and close(f, -1.0) for f in whole):
            return self.say(name, "sign-flip")
        words = {label: text for label, _, text in step["terms"]}
        labels = list(self.parts(failing[0][1]["config"], name)) if failing else []
        for label in labels:
            factors = []
            for t, v in failing:
                term = self.parts(v["config"], name)[label]
                if maxabs(term) <= FLOOR * v["tol"]:
                    continue  # ~0 here: says nothing
                f = fit_factor(t, term, v["tol"], base=v["ref"] - term)
                factors.append((f if f is not None else float("nan"), v["config"]["n"]))
            if not factors:
                continue
            kind = factor_name(factors)
            scale = self.spec["messages"][f"scale.{kind}"] if kind else ""
            if label in words:
                if all(close(f, 0.0) for f, _ in factors):
                    return self.say(name, "missing-branch.term", term=words[label])
                if all(close(f, -1.0) for f, _ in factors):
                    return self.say(name, "sign-flip.term", term=words[label])
                if kind is not None:
                    return self.say(name, "wrong-scale.term", term=words[label], scale=scale)
                continue
            line = f"`{self.spec['lines'][label]}`"
            if all(close(f, 0.0) for f, _ in factors):
                return self.say(name, "missing-branch", path=line)
            if all(close(f, -1.0) for f, _ in factors):
                return self.say(name, "sign-flip.branch", path=line)
            if kind is not None:
                return self.say(name, "wrong-scale.branch", path=line, scale=scale)
        fitted = [(f, v["config"]["n"]) for f, (_, v) in zip(whole, failing, strict=True)]
        if all(f is not None for f, _ in fitted):
            kind = factor_name([(float(f or 0.0), n) for f, n in fitted])
            if kind is not None:
                return self.say(name, "wrong-scale", scale=self.spec["messages"][f"scale.{kind}"])
        if failing:
            t, v = failing[0]
            for other, value in v["config"]["graph64"].items():
                if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                    continue
                if other == step["var"] or value.numel() < 2 or bool((value.abs() < 1e-6).any()):
                    continue
                fits = broadcast_shape(value.shape, v["ref"].shape) == tuple(v["ref"].shape)
                if not fits or maxabs(value - value.mean()) < 1e-3:
                    continue
                times = fit_factor(as64(t) * value, v["ref"], v["tol"])
                if times is not None and close(times, 1.0):
                    return self.say(name, "wrong-scale.missing-factor", factor=other)
                over = fit_factor(as64(t) / value, v["ref"], v["tol"])
                if over is not None and close(over, 1.0):
                    return self.say(name, "wrong-scale.extra-factor", factor=other)
        true_ok = all(v["passed"] for v in verdicts if v["config"]["upstream"] == "true")
        random_bad = any(
            not v["passed"]
            for v in verdicts
            if v["config"]["upstream"] == "random" and v["config"]["lecture_sizes"]
        )
        if true_ok and random_bad:
            if all(t is not None and maxabs(as64(t)) == 0.0 for t, _ in failing):
                return self.say(name, "upstream-shortcut.zero")
            return self.say(name, "upstream-shortcut")
        return self.say(name, "wrong-value")


# --- end of the notebook's part ---


def exercise_spec(ex: Any) -> dict[str, Any]:
    """The exercise as the notebook's checks read it: plain data, written as a literal."""
    from ..core.cases import LARGE_LOGITS_SCALE, NEAR_CONSTANT_SCALE
    from ..core.portable import LEARNING_RATE, TRAINING_STEPS
    from ..diagnoses.evidence import AUTOGRAD_ATTRIBUTES, AUTOGRAD_NAMES, LECTURE_SIZES
    from ..diagnoses.messages import ALIASES, TEXT, fields
    from ..exercises.definition import ROOT
    from ..grading.compare import RTOL

    steps = {
        s.name: {
            "var": s.var,
            "consumers": list(s.consumers),
            "upstream": list(s.upstream),
            "scatter": s.scatter.index if s.scatter else None,
            "fields": fields(ex, s),
            "kind": s.kind,
            "terms": [[t.label, t.expression, t.words] for t in s.terms],
        }
        for s in ex.steps
    }
    training = None
    if any(s.kind == "training" for s in ex.steps):
        training = {
            "steps": TRAINING_STEPS,
            "lr": LEARNING_RATE,
            "cells": [s.name for s in ex.steps if s.kind == "gradient"],
        }
    configs = [
        {
            "name": c.name,
            "words": c.words,
            "sizes": c.config.as_dict(),
            "n": c.config.batch_size,
            "upstream": c.upstream,
            "batch": c.batch,
            "shift": c.shift,
            "uses": list(c.uses),
            "lecture_sizes": c.lecture_sizes,
        }
        for c in ex.public
    ]
    return {
        "id": ex.id,
        "root": ROOT,
        "rtol": RTOL,
        "seed": 20241201,
        "forward": [[line.var, line.expression] for line in ex.forward],
        "lines": {line.var: line.source for line in ex.forward},
        "parameters": list(ex.parameters),
        "variables": list(ex.variables),
        "steps": steps,
        "configs": configs,
        "messages": dict(TEXT),
        "aliases": dict(ALIASES),
        "lecture_sizes": {str(k): v for k, v in LECTURE_SIZES.items()},
        "autograd_names": sorted(AUTOGRAD_NAMES),
        "autograd_attributes": sorted(AUTOGRAD_ATTRIBUTES),
        "training": training,
        "near_constant_scale": NEAR_CONSTANT_SCALE,
        "large_logits_scale": LARGE_LOGITS_SCALE,
    }

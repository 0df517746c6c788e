"""Running one step's answer inside a sandboxed worker, and reading back what it produced.

Two halves of one protocol:

- :func:`run_answer` runs **in the untrusted child** (forked by :mod:`autograder.sandbox`): it
  executes the student's code once per hidden case, each time in a fresh namespace holding clones
  of that case's tensors, and encodes what came out as bytes: a JSON header (one record per case)
  followed by the raw bytes of each answer tensor.
- :func:`parse_payload` runs **in the trusted parent**: it checks every field of those bytes and
  rebuilds plain tensors with ``torch.frombuffer``. Nothing the child produced is unpickled or
  executed, and a child that lies can only hurt its own grade: the references never leave the
  parent.
"""

from __future__ import annotations

import builtins
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .cases import Case
from .catalog import Step

ANSWER_FILE = "<answer>"
"""The file name student code is compiled under: tracebacks point into it by line."""

MAX_ELEMENTS = 1 << 24
"""Answers with more elements than this are not sent back (the largest true gradient has ~2000)."""

MAX_HEADER = 1 << 20

DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}


@dataclass
class Answer:
    """What one case of a step produced, as the parent sees it after validation."""

    kind: str  # "tensor", "number", "missing", "other", "error", "not-implemented", "too-large"
    tensor: torch.Tensor | None = None
    error: str | None = None  # "ZeroDivisionError: division by zero"
    lineno: int | None = None  # line of the answer cell where the error was raised
    type_name: str | None = None  # type of a non-tensor answer
    number: float | None = None  # value of a plain-number answer
    mutated: list[str] = field(default_factory=list)  # inputs the code changed in place
    autograd: bool = False  # autograd was used at run time


# ---------------------------------------------------------------------------------------------
# child side


def _describe(e: BaseException) -> str:
    try:
        text = str(e)
    except BaseException:  # a hostile __str__
        text = ""
    name = type(e).__name__
    return f"{name}: {text[:300]}" if text else name


def _lineno(e: BaseException) -> int | None:
    if isinstance(e, SyntaxError) and e.filename == ANSWER_FILE:
        return e.lineno
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == ANSWER_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


_spied: list[bool] = []


def _install_spies() -> list[bool]:
    """Wrap the autograd entry points (once per process); returns the flag they set.

    Nothing in a step's namespace requires grad; these only fire if an answer asks for autograd.
    """
    if _spied:
        return _spied
    _spied.append(False)

    def spy(fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            _spied[0] = True
            return fn(*args, **kwargs)

        return wrapped

    def spy_enabling(fn: Any) -> Any:  # turning grad mode off (torch.no_grad) is no autograd
        def wrapped(mode: Any, *args: Any, **kwargs: Any) -> Any:
            if mode:
                _spied[0] = True
            return fn(mode, *args, **kwargs)

        return wrapped

    Tensor, forward_ad = torch.Tensor, torch.autograd.forward_ad
    torch.autograd.grad = spy(torch.autograd.grad)
    torch.autograd.backward = spy(torch.autograd.backward)
    Tensor.backward = spy(Tensor.backward)  # type: ignore[method-assign]
    Tensor.requires_grad_ = spy(Tensor.requires_grad_)  # type: ignore[method-assign]
    Tensor.retain_grad = spy(Tensor.retain_grad)  # type: ignore[method-assign]
    torch.set_grad_enabled = spy_enabling(torch.set_grad_enabled)  # type: ignore[misc]
    torch.enable_grad = spy(torch.enable_grad)  # type: ignore[misc]
    # The gates under those: grad mode switched on directly, and forward-mode AD.
    torch._C._set_grad_enabled = spy_enabling(torch._C._set_grad_enabled)
    torch._C._enter_dual_level = spy(torch._C._enter_dual_level)
    forward_ad.enter_dual_level = spy(forward_ad.enter_dual_level)
    return _spied


def run_answer(step: Step, cases: list[Case], code: str) -> bytes:
    """Execute ``code`` for ``step`` under each case; return the encoded answers.

    Runs in the sandboxed child. Everything the encoder needs is bound before the student's code
    runs, so monkeypatching ``torch`` or builtins afterwards cannot change how answers are read.
    """
    Tensor, equal, clone = torch.Tensor, torch.equal, torch.Tensor.clone
    detach, contiguous, numel = torch.Tensor.detach, torch.Tensor.contiguous, torch.Tensor.numel
    reshape, view, as_numpy = torch.Tensor.reshape, torch.Tensor.view, torch.Tensor.numpy
    uint8, is_grad_enabled = torch.uint8, torch.is_grad_enabled
    set_grad, dumps, isfinite = torch._C._set_grad_enabled, json.dumps, math.isfinite

    def raw(t: torch.Tensor) -> bytes:  # the bytes of a contiguous tensor, any dtype
        return as_numpy(view(reshape(t, (-1,)), uint8)).tobytes()

    used_autograd = _install_spies()

    records: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    try:
        compiled = compile(code, ANSWER_FILE, "exec")
    except SyntaxError as e:
        compiled = None
        syntax = {"kind": "error", "error": _describe(e), "lineno": _lineno(e)}
    for case in cases:
        if compiled is None:
            records.append(dict(syntax, case=case.name))
            continue
        pristine = case.inputs(step)  # the parent's tensors, shared copy-on-write: never handed out
        given = {k: clone(v) if isinstance(v, Tensor) else v for k, v in pristine.items()}
        ns: dict[str, Any] = {"__builtins__": builtins, "torch": torch, "F": F, **given}
        set_grad(False)
        used_autograd[0] = False
        rec: dict[str, Any] = {"case": case.name}
        try:
            exec(compiled, ns)
            value = ns.get(step.name, ns)  # ns itself stands for "never assigned"
            if value is ns:
                rec["kind"] = "missing"
            elif type(value) is Tensor:
                t = contiguous(clone(detach(value)))
                if numel(t) > MAX_ELEMENTS:
                    rec.update(kind="too-large", shape=list(t.shape))
                else:
                    rec.update(
                        kind="tensor",
                        dtype=str(t.dtype).removeprefix("torch."),
                        shape=[int(s) for s in t.shape],
                    )
                    rec["autograd_result"] = bool(value.requires_grad or value.grad_fn is not None)
                    blobs.append(raw(t))
                    rec["nbytes"] = len(blobs[-1])
            elif type(value) in (int, float, bool) and isfinite(float(value)):
                rec.update(kind="number", number=float(value))
            else:
                rec.update(kind="other", type_name=type(value).__name__[:80])
        except NotImplementedError as e:
            rec.update(kind="not-implemented", error=_describe(e), lineno=_lineno(e))
        except BaseException as e:  # SystemExit and KeyboardInterrupt are the answer's too
            rec.update(kind="error", error=_describe(e), lineno=_lineno(e))
        rec["mutated"] = [
            k for k, v in given.items() if isinstance(v, Tensor) and not equal(v, pristine[k])
        ]
        rec["autograd"] = bool(used_autograd[0] or is_grad_enabled() or rec.get("autograd_result"))
        records.append(rec)
    header = dumps({"cases": records}).encode()
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


# ---------------------------------------------------------------------------------------------
# parent side


class PayloadError(ValueError):
    """The worker's bytes do not follow the protocol (a crash mid-write, or tampering)."""


def _tensor(rec: dict[str, Any], blob: bytes) -> torch.Tensor:
    dtype = DTYPES.get(rec.get("dtype"))  # type: ignore[arg-type]
    shape = rec.get("shape")
    if dtype is None or not isinstance(shape, list) or len(shape) > 8:
        raise PayloadError("bad tensor header")
    if not all(type(s) is int and 0 <= s <= MAX_ELEMENTS for s in shape):
        raise PayloadError("bad tensor shape")
    count = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if count > MAX_ELEMENTS or count * itemsize != len(blob):
        raise PayloadError("tensor size does not match its bytes")
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(blob), dtype=dtype).reshape(shape)


def parse_payload(payload: bytes, cases: list[Case]) -> dict[str, Answer]:
    """Validate the worker's bytes and return one Answer per case name (PayloadError if bad)."""
    if len(payload) < 8:
        raise PayloadError("truncated payload")
    (hlen,) = struct.unpack("<Q", payload[:8])
    if hlen > MAX_HEADER or 8 + hlen > len(payload):
        raise PayloadError("bad header length")
    try:
        header = json.loads(payload[8 : 8 + hlen])
    except (ValueError, UnicodeDecodeError):
        raise PayloadError("header is not JSON") from None
    recs = header.get("cases") if isinstance(header, dict) else None
    names = [c.name for c in cases]
    if (
        not isinstance(recs, list)
        or [r.get("case") if isinstance(r, dict) else None for r in recs] != names
    ):
        raise PayloadError("cases do not match")
    offset, out = 8 + hlen, {}
    for rec in recs:
        kind = rec.get("kind")
        ans = Answer(kind=kind if isinstance(kind, str) else "other")
        if kind == "tensor":
            n = rec.get("nbytes")
            if type(n) is not int or n < 0 or offset + n > len(payload):
                raise PayloadError("bad tensor length")
            ans.tensor = _tensor(rec, payload[offset : offset + n])
            offset += n
        elif kind == "number":
            num = rec.get("number")
            ans.number = float(num) if isinstance(num, (int, float)) else None
        elif kind not in ("missing", "other", "error", "not-implemented", "too-large"):
            raise PayloadError("unknown answer kind")
        for key in ("error", "type_name"):
            val = rec.get(key)
            setattr(ans, key, val[:400] if isinstance(val, str) else None)
        line = rec.get("lineno")
        ans.lineno = line if type(line) is int else None
        mutated = rec.get("mutated")
        ans.mutated = (
            [m for m in mutated if isinstance(m, str)][:20] if isinstance(mutated, list) else []
        )
        ans.autograd = rec.get("autograd") is True
        out[rec["case"]] = ans
    if offset != len(payload):
        raise PayloadError("trailing bytes")
    return out

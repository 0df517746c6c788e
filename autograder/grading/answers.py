"""What crosses into and out of a sandbox, on the grader's side: case inputs out, answers in.

- :func:`encode_bank` turns an exercise's cases into the bank a sandbox holds: every forward
  tensor but the loss, and every upstream gradient, as raw bytes with dtype and shape. Inputs
  only: references never leave the grader.
- :func:`parse_payload` checks every field of the bytes the runner sent for one answer and
  rebuilds plain tensors with ``torch.frombuffer``. Nothing the sandbox produced is unpickled or
  executed, and a sandbox that lies can only hurt its own grade.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.cases import Case
from ..exercises.definition import ROOT

MAX_ELEMENTS = 1 << 24
"""Answers with more elements than this are refused (the largest true gradient has ~2000)."""

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

KINDS = ("tensor", "number", "missing", "other", "error", "not-implemented", "too-large")


@dataclass
class Answer:
    """What one case of a step produced, as the grader sees it after validation."""

    kind: str  # one of KINDS
    tensor: torch.Tensor | None = None
    error: str | None = None  # "ZeroDivisionError: division by zero"
    lineno: int | None = None  # line of the answer cell where the error was raised
    type_name: str | None = None  # type of a non-tensor answer
    number: float | None = None  # value of a plain-number answer
    mutated: list[str] = field(default_factory=list)  # inputs the code changed in place
    autograd: bool = False  # grad mode on, or a result that requires grad


class PayloadError(ValueError):
    """The sandbox's bytes do not follow the protocol (a crash mid-write, or tampering)."""


def _raw(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def encode_bank(cases: list[Case]) -> tuple[dict[str, Any], list[bytes]]:
    """The inputs of every case (see the module docstring) as a bank frame's header and blobs."""
    out, blobs = [], []
    for case in cases:
        ints = {k: v for k, v in case.graph.items() if isinstance(v, (int, float))}
        tensors = []
        named = [(k, v, "graph") for k, v in case.graph.items() if k != ROOT]
        needed = {u for step in case.exercise.steps for u in step.upstream}  # no leaf
        named += [(k, v, "upstream") for k, v in case.upstream.items() if k in needed]
        for name, value, kind in named:
            if isinstance(value, torch.Tensor):
                dtype = str(value.dtype).removeprefix("torch.")
                tensors.append([name, dtype, [int(s) for s in value.shape], kind])
                blobs.append(_raw(value))
        out.append({"name": case.name, "ints": ints, "tensors": tensors})
    return {"cases": out}, blobs


def _tensor(rec: dict[str, Any], blob: bytes) -> torch.Tensor:
    name = rec.get("dtype")
    dtype = DTYPES.get(name) if isinstance(name, str) else None
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


def parse_payload(payload: bytes, case_names: list[str]) -> dict[str, Answer]:
    """Validate the runner's bytes for one answer; one Answer per case name (PayloadError if
    anything is off). The bytes may be an answer's forgery (it can write to the result pipe
    itself), so no field is trusted: whatever a malformed one raises becomes a PayloadError."""
    try:
        return _parse_payload(payload, case_names)
    except PayloadError:
        raise
    except (TypeError, ValueError, OverflowError, KeyError, IndexError, RuntimeError) as e:
        raise PayloadError(f"malformed payload ({type(e).__name__})") from None


def _parse_payload(payload: bytes, case_names: list[str]) -> dict[str, Answer]:
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
    if (
        not isinstance(recs, list)
        or [r.get("case") if isinstance(r, dict) else None for r in recs] != case_names
    ):
        raise PayloadError("cases do not match")
    offset, out = 8 + hlen, {}
    for rec in recs:
        kind = rec.get("kind")
        if kind not in KINDS:
            raise PayloadError("unknown answer kind")
        ans = Answer(kind=kind)
        if kind == "tensor":
            n = rec.get("nbytes")
            if type(n) is not int or n < 0 or offset + n > len(payload):
                raise PayloadError("bad tensor length")
            ans.tensor = _tensor(rec, payload[offset : offset + n])
            offset += n
        elif kind == "number":
            num = rec.get("number")
            if not (type(num) is float or (type(num) is int and abs(num) < 2**63)):
                raise PayloadError("bad number")
            ans.number = float(num) if math.isfinite(num) else None
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

"""Outcomes kept on disk between runs, for a course's CI that regrades the same answers.

An entry is one answer's outcome (status, detail, what it printed, the autograd it called, and
the encoded answers) under a key of the kit's version, the seed, the exercise, the step and the
normalised code: the same answer under the same hidden cases. Only the grader writes entries,
atomically, into a folder of its own (mode 0700); an entry that is unreadable, written by
another user, or made under another key is ignored and its answer graded again. An entry's
answers are validated like a live sandbox's before they are judged: the cache can make a run
faster, never a grade different.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path

from ..sandbox.limits import Outcome

_FORMAT = "backprop-ninja-outcome-1"


class OutcomeCache:
    """A folder of outcomes for one kit version and seed."""

    def __init__(self, folder: Path, version: str, seed: int) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.version, self.seed = version, seed

    def _id(self, key: tuple[str, str, str]) -> str:
        return json.dumps([_FORMAT, self.version, self.seed, *key])

    def _path(self, ident: str) -> Path:
        return self.folder / (hashlib.sha256(ident.encode()).hexdigest() + ".bin")

    def get(self, key: tuple[str, str, str]) -> Outcome | None:
        """The stored outcome of ``key``, or None (absent, corrupt, foreign)."""
        ident = self._id(key)
        path = self._path(ident)
        try:
            info = path.stat()
            if info.st_uid != os.geteuid() or info.st_mode & 0o022:
                return None  # not written by this grader's user
            data = path.read_bytes()
            (hlen,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8 : 8 + hlen])
            if header.get("id") != ident or header.get("status") not in ("ok", "timeout"):
                return None
            payload = data[8 + hlen :]
            if len(payload) != header.get("nbytes"):
                return None
            return Outcome(
                status=header["status"],
                payload=payload,
                detail=str(header.get("detail", "")),
                output=str(header.get("output", "")),
                seconds=float(header.get("seconds", 0.0)),
                autograd=[str(a) for a in header.get("autograd", [])],
            )
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            return None

    def put(self, key: tuple[str, str, str], outcome: Outcome) -> None:
        """Store an outcome (only of answers that ran to an end: a crash is not kept)."""
        if outcome.status not in ("ok", "timeout") or not outcome.own:
            return  # a crash, or an outcome that is its submission's rather than the answer's
        ident = self._id(key)
        header = {
            "id": ident,
            "status": outcome.status,
            "detail": outcome.detail,
            "output": outcome.output,
            "seconds": outcome.seconds,
            "autograd": outcome.autograd,
            "nbytes": len(outcome.payload),
        }
        head = json.dumps(header).encode()
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(struct.pack("<Q", len(head)) + head + outcome.payload)
            os.replace(tmp, self._path(ident))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

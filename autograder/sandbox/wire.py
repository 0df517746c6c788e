"""The one wire format between the grader and its sandboxes: length-prefixed frames.

A frame is a fixed prefix, a JSON header and zero or more binary blobs:

    prefix  = magic (4 bytes) | header length (u32) | blob count (u32) | blobs length (u64)
    header  = UTF-8 JSON object, at most ``MAX_HEADER`` bytes
    blobs   = blob lengths (u64 each), then the blobs, concatenated

Both ends read *exactly* one frame's bytes and never more, so two processes can take turns on
one stream (the sandbox's runner reads the frame that tells it to fork, and the child it forks
reads the next one). Nothing is pickled: headers are JSON, tensors travel as raw bytes with
their dtype and shape in the header, and each end checks every length against its own caps.

This module is stdlib-only: it runs inside the sandbox, in an interpreter that imported nothing
of the kit (it is copied there beside :mod:`runner`).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

MAGIC = b"BPN1"
_PREFIX = struct.Struct("<4sIIQ")
_LENGTH = struct.Struct("<Q")

MAX_HEADER = 1 << 22
"""Largest header accepted (4 MiB: 26 steps of code at most 100,000 characters each fit)."""


class WireError(ValueError):
    """The bytes on the stream are not a frame (a crash mid-write, or tampering)."""


def encode(header: dict[str, Any], blobs: list[bytes] | tuple[bytes, ...] = ()) -> bytes:
    """One frame: prefix, JSON header, blob lengths and blobs. Non-finite floats are refused:
    every header is strict JSON."""
    head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    lengths = b"".join(_LENGTH.pack(len(b)) for b in blobs)
    total = sum(len(b) for b in blobs)
    return _PREFIX.pack(MAGIC, len(head), len(blobs), total) + head + lengths + b"".join(blobs)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte (a pipe or socket may take them in pieces)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def send(fd: int, header: dict[str, Any], blobs: list[bytes] | tuple[bytes, ...] = ()) -> None:
    """Write one frame to ``fd``."""
    write_all(fd, encode(header, blobs))


def read_exact(fd: int, n: int) -> bytes:
    """Exactly ``n`` bytes from ``fd``; EOFError if the stream ends first."""
    return bytes(read_into(fd, n))


def read_into(fd: int, n: int) -> bytearray:
    """Exactly ``n`` bytes from ``fd``, read straight into the buffer returned: no other copy of
    them is left in this process's memory (the runner's banks: see :func:`receive`). EOFError
    if the stream ends first ("closed" if it ended before any of them)."""
    buf = bytearray(n)
    view = memoryview(buf)
    at = 0
    while at < n:
        got = os.readv(fd, [view[at : at + (1 << 20)]])
        if not got:
            raise EOFError("the stream ended inside a frame" if at else "closed")
        at += got
    view.release()
    return buf


def receive(fd: int, max_body: int) -> tuple[dict[str, Any], list[bytearray]]:
    """Read one frame from ``fd``: (header, blobs). EOFError at the end of the stream,
    :class:`WireError` for bytes that are no frame or exceed ``max_body``. Each blob is read
    into its own buffer and is the only copy of its bytes here, so whoever keeps it (a tensor
    over it) can wipe them."""
    magic, hlen, count, total = _PREFIX.unpack(read_exact(fd, _PREFIX.size))
    if magic != MAGIC or hlen > MAX_HEADER or count > 1 << 16 or total > max_body:
        raise WireError("not a frame, or a frame over the limits")
    header = _header(read_exact(fd, hlen))
    lengths = [_LENGTH.unpack(read_exact(fd, 8))[0] for _ in range(count)]
    if sum(lengths) != total:
        raise WireError("blob lengths do not add up")
    return header, [read_into(fd, n) for n in lengths]


def _header(raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise WireError("the header is not JSON") from None
    if not isinstance(header, dict):
        raise WireError("the header is not an object")
    return header


class Reader:
    """Frames from a non-blocking fd, fed as bytes arrive (the grader's side of the event loop).

    ``feed`` returns the frames completed so far; a frame over the caps raises
    :class:`WireError` as soon as its prefix is read, before its body arrives.
    """

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], list[bytes]]]:
        self.buffer += data
        out: list[tuple[dict[str, Any], list[bytes]]] = []
        while True:
            frame = self._next()
            if frame is None:
                return out
            out.append(frame)

    def _next(self) -> tuple[dict[str, Any], list[bytes]] | None:
        buf = self.buffer
        if len(buf) < _PREFIX.size:
            return None
        magic, hlen, count, total = _PREFIX.unpack_from(buf)
        if magic != MAGIC or hlen > MAX_HEADER or count > 1 << 16 or total > self.max_body:
            raise WireError("not a frame, or a frame over the limits")
        size = _PREFIX.size + hlen + 8 * count + total
        if len(buf) < size:
            return None
        at = _PREFIX.size
        header = _header(bytes(buf[at : at + hlen]))
        at += hlen
        lengths = [_LENGTH.unpack_from(buf, at + 8 * i)[0] for i in range(count)]
        if sum(lengths) != total:
            raise WireError("blob lengths do not add up")
        at += 8 * count
        blobs = []
        for n in lengths:
            blobs.append(bytes(buf[at : at + n]))
            at += n
        del buf[:size]
        return header, blobs

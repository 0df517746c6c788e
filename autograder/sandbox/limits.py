"""The limits a sandbox enforces, and what comes back for one answer.

Both are plain data shared by the grader's modules; the sandbox receives the limits as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "timeout", "crashed", "too-large", "no-result"]


@dataclass(frozen=True)
class Limits:
    """What one submission may use in its sandbox."""

    step_seconds: float = 10.0  # wall clock per answer, measured in the sandbox
    budget_seconds: float = 60.0  # wall clock for all of a submission's answers together
    cpu_seconds: int = 20  # RLIMIT_CPU of the process running an answer
    memory_bytes: int = 4 * 2**30  # address space an answer may add to what it inherits
    output_bytes: int = 64 * 1024  # head of an answer's stdout+stderr kept
    result_bytes: int = 8 * 2**20  # largest encoded answer accepted (every case's tensors;
    # the largest true answer of any exercise is under 50 kB: the grader holds what it accepts)
    tmp_bytes: int = 64 * 2**20  # the scratch tmpfs (and the largest file written)

    def wire(self) -> dict[str, float | int]:
        """The limits as the runner reads them."""
        return {
            "step_seconds": self.step_seconds,
            "budget_seconds": self.budget_seconds,
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "output_bytes": self.output_bytes,
            "result_bytes": self.result_bytes,
            "file_bytes": self.tmp_bytes,
        }


@dataclass(frozen=True)
class Outcome:
    """How running one answer went, as the grader receives it."""

    status: Status
    payload: bytes  # the encoded answers (only meaningful when status == "ok")
    detail: str  # human-readable reason for any other status
    output: str = ""  # head of what the answer printed
    seconds: float = 0.0  # wall time of the answer
    autograd: list[str] = field(default_factory=list)  # autograd entry points it called
    own: bool = True
    """False when the outcome says more about the rest of its submission than about the answer's
    code (a time budget other steps spent, a sandbox that failed or was stopped as a whole):
    such an outcome must not be given to another submission's identical answer, nor kept."""

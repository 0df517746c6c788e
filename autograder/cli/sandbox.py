"""``backprop-ninja sandbox``: how answers would be confined on this machine, and why."""

from __future__ import annotations

import argparse
import os

from ..sandbox.memory import MemoryCgroup
from ..sandbox.pool import SandboxUnavailable, choose_mode
from ..sandbox.seccomp import supported


def sandbox_command(args: argparse.Namespace) -> int:
    """Print the confinement mode, seccomp and memory cgroup; 1 when no sandbox can be had."""
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    try:
        found = choose_mode()
    except SandboxUnavailable as e:
        print(f"as {who}: {e}")
        return 1
    group = MemoryCgroup.create(f"backprop-ninja-probe-{os.getpid()}")
    if group is not None:
        group.remove()
    memory = (
        f"a memory cgroup (v{group.version}) per sandbox"
        if group
        else "no cgroup here: answers cannot start processes, and each one's address space "
        "is limited"
    )
    print(f"as {who}: sandboxes confined by {found.mode} ({found.reason})")
    print(f"seccomp filter: {'yes' if supported() else 'no (unknown machine)'}")
    print(f"memory: {memory}")
    return 0

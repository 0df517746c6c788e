"""Seccomp filters for the sandbox: the system calls untrusted code may not make, as one list.

Two filters, installed with ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` (filters stack and
survive ``fork``; none can be removed):

- :data:`SANDBOX` (the whole sandbox, installed by the runner once torch is imported): no
  ``execve`` (a fresh interpreter would have a fresh, unpoisoned torch), no joining or cloning
  into namespaces, no mounts, no ``ptrace`` or cross-process memory access, no kernel keyring,
  BPF, perf, userfaultfd or io_uring (whose operations bypass seccomp), no ``memfd_create`` or
  SysV IPC (memory that no process's size accounts for), no module loading, reboot, swap, clock
  or quota changes. ``unshare`` and ``mount`` stay allowed here: the runner puts each process
  that runs answers into user, PID and mount namespaces of its own, with a scratch tmpfs of its
  own, before it installs the second filter.
- :data:`STEP` (each process that runs answers, on top of the first): additionally no
  ``unshare`` or ``mount``, and no new process or thread at all (``clone``, ``fork``,
  ``vfork`` refused, ``clone3`` answers ``ENOSYS`` so that the C library falls back to
  ``clone``): a step's memory is its own process's, bounded by its address-space limit, and no
  thread starts with autograd's default grad mode (grad mode is per thread, and on in a new
  one).

A refused call fails with ``EPERM``; a call from another architecture's ABI (x32 on x86-64) kills
the process.

Stdlib only: this runs inside the sandbox, beside :mod:`runner`.
"""

from __future__ import annotations

import ctypes
import errno
import platform
from collections.abc import Callable

# Syscall numbers by machine: (name -> number). x86_64 from arch/x86/entry/syscalls/syscall_64.tbl,
# aarch64 from the generic table include/uapi/asm-generic/unistd.h.
_X86_64 = {
    "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
    "keyctl": 250, "add_key": 248, "request_key": 249, "mount": 165, "umount2": 166,
    "pivot_root": 155, "unshare": 272, "setns": 308, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167,
    "swapoff": 168, "chroot": 161, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "msgget": 68, "semget": 64,
    "acct": 163, "quotactl": 179, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "pidfd_getfd": 438,
    "process_madvise": 440, "kcmp": 312, "syslog": 103, "vhangup": 153, "settimeofday": 164,
    "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "iopl": 172, "ioperm": 173,
    "lookup_dcookie": 212, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
    "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
    "clone": 56, "clone3": 435, "fork": 57, "vfork": 58,
    "statmount": 457, "listmount": 458, "open_tree_attr": 467,
}  # fmt: skip
_AARCH64 = {
    "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
    "keyctl": 219, "add_key": 217, "request_key": 218, "mount": 40, "umount2": 39,
    "pivot_root": 41, "unshare": 97, "setns": 268, "kexec_load": 104, "kexec_file_load": 294,
    "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224,
    "swapoff": 225, "chroot": 51, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "msgget": 186, "semget": 190,
    "acct": 89, "quotactl": 60, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "pidfd_getfd": 438,
    "process_madvise": 440, "kcmp": 272, "syslog": 116, "vhangup": 58, "settimeofday": 170,
    "clock_settime": 112, "adjtimex": 171, "clock_adjtime": 266,
    "lookup_dcookie": 18, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
    "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185,
    "clone": 220, "clone3": 435,
    "statmount": 457, "listmount": 458, "open_tree_attr": 467,
}  # fmt: skip
_MACHINES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}

SANDBOX: tuple[str, ...] = (
    *("execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp"),
    *("pidfd_getfd", "process_madvise", "perf_event_open", "bpf", "userfaultfd", "keyctl"),
    *("add_key", "request_key", "umount2", "pivot_root", "setns", "chroot"),
    *("open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"),
    *("open_tree_attr", "statmount", "listmount"),  # newer calls on mounts, as open_tree
    *("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"),
    *("reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "vhangup", "settimeofday"),
    *("clock_settime", "adjtimex", "clock_adjtime", "iopl", "ioperm", "lookup_dcookie"),
    *("open_by_handle_at", "name_to_handle_at", "io_uring_setup", "io_uring_enter"),
    *("io_uring_register", "memfd_create", "memfd_secret", "shmget", "msgget", "semget"),
    *("mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"),
)
"""Refused everywhere in the sandbox (``clone`` is refused with namespace flags)."""

STEP: tuple[str, ...] = ("fork", "vfork", "unshare", "mount")
"""Refused too in processes that run answers (and ``clone`` in every form)."""

CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
CLONE_NAMESPACES |= 0x40000000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def supported() -> bool:
    """True on a machine whose syscall numbers this module knows."""
    return platform.machine() in _MACHINES


def program(denied: tuple[str, ...], no_clone: bool) -> list[tuple[int, int, int, int]]:
    """The BPF program as ``(code, jt, jf, k)`` tuples (see the module docstring): ``clone``
    refused with namespace flags, or always with ``no_clone``.

    Layout: check the architecture, load the syscall number, one ``jeq`` per refused call,
    then the ``clone`` test, then the return instructions the jumps lead to.
    """
    arch, numbers = _MACHINES[platform.machine()]
    ops: list[tuple[int, str | int, str | int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 0, "kill", arch),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if platform.machine() == "x86_64":
        ops.append((_JGE_K, "kill", 0, 0x40000000))  # the x32 ABI
    for name in denied:
        if name in numbers:
            ops.append((_JEQ_K, "deny", 0, numbers[name]))
    if "clone3" in numbers:
        ops.append((_JEQ_K, "enosys", 0, numbers["clone3"]))
    ops.append((_JEQ_K, "clone", 0, numbers["clone"]))
    ops.append((_RET_K, 0, 0, _ALLOW))
    labels = {"clone": len(ops)}
    ops.append((_LD_W_ABS, 0, 0, 16))  # the low 32 bits of args[0], the clone flags
    if no_clone:
        ops.append((_RET_K, 0, 0, _ERRNO | errno.EPERM))
    else:
        ops.append((_JSET_K, "deny", 0, CLONE_NAMESPACES))
        ops.append((_RET_K, 0, 0, _ALLOW))
    labels["deny"] = len(ops)
    ops.append((_RET_K, 0, 0, _ERRNO | errno.EPERM))
    labels["enosys"] = len(ops)
    ops.append((_RET_K, 0, 0, _ERRNO | errno.ENOSYS))
    labels["kill"] = len(ops)
    ops.append((_RET_K, 0, 0, _KILL_PROCESS))

    def offset(target: str | int, at: int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - at - 1
        if not 0 <= jump <= 255:  # pragma: no cover - guards edits of the lists
            raise ValueError("seccomp jump out of range")
        return jump

    return [(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(ops)]


def prepare(denied: tuple[str, ...], no_clone: bool = False) -> Callable[[], None]:
    """A function that installs a filter refusing ``denied`` (and, with ``no_clone``, every new
    process or thread) in the calling thread and everything it starts afterwards; it raises
    OSError if the kernel refuses. Everything it needs is built now, so the runner can prepare
    it before it takes ``ctypes`` out of the answers' reach and install it in each answer's
    process afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl, get_errno, byref = libc.prctl, ctypes.get_errno, ctypes.byref
    ops = program(denied, no_clone)
    filters = (_Filter * len(ops))(*[_Filter(*op) for op in ops])
    prog = _Program(len(ops), filters)

    def install() -> None:
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(get_errno(), "no_new_privs")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, byref(prog), 0, 0) != 0:
            raise OSError(get_errno(), "seccomp filter refused")

    install.keep = (filters, prog)  # type: ignore[attr-defined]  # alive as long as install
    return install


def install(denied: tuple[str, ...], no_clone: bool = False) -> None:
    """Install a filter at once (see :func:`prepare`)."""
    prepare(denied, no_clone)()


def describe() -> str:
    """The two lists, for the README and error messages."""
    step = ", ".join(STEP)
    return f"refused in the sandbox: {', '.join(SANDBOX)}; in answers also: {step}, clone"


__all__ = ["SANDBOX", "STEP", "describe", "install", "prepare", "program", "supported"]

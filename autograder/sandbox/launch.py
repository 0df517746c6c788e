"""Start a sandbox: confine a fresh interpreter, then run the runner in it.

Run by the grader as ``python -I launch.py PLAN`` (stdlib only, trusted; nothing untrusted exists
yet). ``PLAN`` is JSON made by :func:`autograder.sandbox.plan.make_plan`. Three modes:

``userns`` (the kit's own confinement, through unprivileged user namespaces; as root too):

1. join the sandbox's memory cgroup, if the plan names one;
2. fork; the child unshares the user, mount, PID, network, IPC, UTS and cgroup namespaces; this
   process writes its uid and gid maps (as root: root, to build the tree, and ``nobody``, whom
   the sandbox becomes; otherwise the grader's own ids as ``nobody``: the namespace's
   capabilities build the tree, and the sandbox is ``nobody`` inside either way);
3. the child forks the sandbox's PID 1, which builds a new root on a tmpfs holding only:
   read-only binds of the interpreter, its packages and the system libraries (``binds``), empty
   read-only covers over what must not be seen inside them (``hide``: the kit's own package in
   site-packages), a read-only ``/dev`` of ``{null,zero,full,random,urandom}`` only (no
   ``/dev/shm``: shared memory is memory no process accounts for), a ``/proc`` of its own PID
   namespace, a private scratch ``/tmp`` (a tmpfs of ``tmp_bytes``; ``/scratch`` where the
   interpreter itself lives under ``/tmp``, see :func:`plan.scratch_path`) and ``/runner`` (the
   runner's three files, copied, read-only); then pivots into it and detaches the old root, so
   no course folder, home, submission, gradebook or host socket exists inside;
4. drops privileges: ``nobody`` as root, else every capability (bounding set emptied,
   ``SECBIT_NOROOT`` locked, so exec gains none back); ``no_new_privs``; rlimits for files,
   processes and core dumps; an empty environment but ``PATH``, ``LANG``, and ``HOME`` and
   ``TMPDIR`` set to the scratch;
5. execs ``python -I -B /runner/runner.py`` with the grader's stream as fd 3.

The network namespace has no interface up: no network, and abstract Unix sockets are the
namespace's own. ``bwrap`` does the same with bubblewrap (where the distribution restricts user
namespaces to it, as Ubuntu 23.10+ does through AppArmor). ``none`` confines nothing but the
rlimits and is used only when the grader is told to accept the risk.

This process and the intermediate child only wait, and exit with the sandbox's status; each
dies with its parent (``PR_SET_PDEATHSIG``), so a grader killed outright leaves no sandbox.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import sys
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 38, 24, 28
SECURE_ALL = 0x2F  # NOROOT, NOROOT_LOCKED, NO_SETUID_FIXUP(_LOCKED), KEEP_CAPS_LOCKED
EXIT_CONFINEMENT = 75
"""Exit status when the namespaces cannot be set up (the grader reports it, or falls back)."""

DEVICES = ("null", "zero", "full", "random", "urandom")
"""The device nodes the sandbox sees."""


class ConfinementError(OSError):
    """A step of the confinement failed; the message names it."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise ConfinementError(err, f"{what}: {os.strerror(err)}")


def _encode(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    args = (_encode(source), _encode(target), _encode(fstype), flags, _encode(data or None))
    _check(_libc.mount(*args), target)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _makedirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


# --- the new root ------------------------------------------------------------------------------


def _bind(old: str, new: str) -> None:
    """Bind ``old`` (a path of the old root) at ``new``, read-only."""
    if os.path.islink(old):
        _makedirs(os.path.dirname(new))
        if not os.path.lexists(new):
            os.symlink(os.readlink(old), new)
        return
    if os.path.isdir(old):
        _makedirs(new)
    else:
        _makedirs(os.path.dirname(new))
        if not os.path.exists(new):
            open(new, "w").close()
    _mount(old, new, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    try:  # keep the flags the kernel locked on the original mount, add nosuid and nodev
        _mount(None, new, None, flags | MS_NOSUID | MS_NODEV)
    except ConfinementError:
        _mount(None, new, None, flags)


def build_root(plan: dict[str, Any]) -> None:
    """Steps 3 of the module docstring, in this process (PID 1 of the new namespaces)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates out
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for d in ("/tmp/newroot", "/tmp/oldroot"):
        os.mkdir(d, 0o755)
    os.chdir("/tmp")
    _check(_libc.syscall(155 if _x86_64() else 41, b"/tmp", b"/tmp/oldroot"), "pivot_root")
    os.chdir("/")
    old, new = "/oldroot", "/newroot"
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for path in plan["binds"]:
        if os.path.lexists(old + path):
            _bind(old + path, new + path)
    for path in plan["hide"]:
        if os.path.isdir(new + path):
            _mount("tmpfs", new + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k")
    _makedirs(new + "/dev")
    _mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name in DEVICES:
        open(f"{new}/dev/{name}", "w").close()
        _mount(f"{old}/dev/{name}", f"{new}/dev/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
        os.symlink(target, f"{new}/dev/{name}")
    os.symlink("/proc/self/fd/1", f"{new}/dev/stdout")
    os.symlink("/proc/self/fd/2", f"{new}/dev/stderr")
    _mount(None, new + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    _makedirs(new + "/proc")
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(new + "/proc/sys", new + "/proc/sys", None, MS_BIND | MS_REC)  # sysctls: read-only
    _mount(None, new + "/proc/sys", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _makedirs(new + plan["tmp"])
    owner = ",uid=65534,gid=65534" if plan["nobody"] else ""
    tmp = f"size={int(plan['tmp_bytes'])},mode=0700,nr_inodes=4096{owner}"
    _mount("tmpfs", new + plan["tmp"], "tmpfs", MS_NOSUID | MS_NODEV, tmp)
    _makedirs(new + "/runner")
    _mount("tmpfs", new + "/runner", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for name in plan["runner_files"]:
        shutil.copyfile(old + os.path.join(plan["runner_dir"], name), f"{new}/runner/{name}")
    _mount(None, new + "/runner", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(new)
    _check(_libc.syscall(155 if _x86_64() else 41, b".", b"."), "pivot_root into the new root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    hostname = b"sandbox"
    _check(_libc.sethostname(hostname, len(hostname)), "sethostname")


def _complain(e: BaseException) -> None:
    """Say on stderr what failed (the grader shows it); flushed, since we leave with _exit."""
    with contextlib.suppress(OSError):
        os.write(2, f"backprop-ninja sandbox: {e}\n".encode())


def _x86_64() -> bool:
    return os.uname().machine == "x86_64"


def drop_privileges(plan: dict[str, Any]) -> None:
    """Step 4: become nobody (as root) or lose every capability; no new privileges."""
    if plan["nobody"]:
        os.setgroups([])
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)  # from in-sandbox root: every capability goes
    else:
        _check(_libc.prctl(PR_SET_SECUREBITS, SECURE_ALL, 0, 0, 0), "securebits")
        for cap in range(64):
            if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                break  # past the last capability this kernel knows
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _limits(plan: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(plan["tmp_bytes"]),) * 2)
    nproc = int(plan["nproc"])
    if nproc > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _exec_runner(plan: dict[str, Any], runner: str, scratch: str) -> None:
    control = int(plan["control_fd"])
    if control != 3:
        os.dup2(control, 3)
    os.set_inheritable(3, True)
    os.closerange(4, 65536)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    env = {k: v for k, v in plan["env"].items()}
    env.update(HOME=scratch, TMPDIR=scratch)
    os.chdir(scratch)
    python = plan["python"]
    os.execve(python, [python, "-I", "-B", runner], env)


def _wait_and_exit(pid: int) -> None:
    """Wait for ``pid`` and leave with its status (a signal is passed on as 128 + signal)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def _die_with_parent(expected: int | None) -> None:
    """SIGKILL when the parent dies; leave now if it already has (``expected`` is None in a new
    PID namespace, where the parent is outside and ``getppid`` says 0)."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if expected is not None and os.getppid() != expected:
        os._exit(EXIT_CONFINEMENT)


def launch_userns(plan: dict[str, Any]) -> None:
    """Steps 2-5 of the module docstring."""
    uid, gid, me = os.getuid(), os.getgid(), os.getpid()
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(ready_r)
            os.close(mapped_w)
            _die_with_parent(me)
            flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
            _check(_libc.unshare(flags | CLONE_NEWUTS | CLONE_NEWCGROUP), "unshare")
            os.write(ready_w, b"u")
            if os.read(mapped_r, 1) != b"m":
                os._exit(EXIT_CONFINEMENT)
            init = os.fork()
            if init == 0:
                _die_with_parent(None)
                build_root(plan)
                drop_privileges(plan)
                _limits(plan)
                if plan.get("probe"):
                    os._exit(0)
                _exec_runner(plan, "/runner/runner.py", plan["tmp"])
            _wait_and_exit(init)
        except BaseException as e:
            _complain(e)
            os._exit(EXIT_CONFINEMENT)
    os.close(ready_w)
    os.close(mapped_r)
    try:
        if os.read(ready_r, 1) != b"u":
            _wait_and_exit(child)
        if uid == 0:  # root: in-sandbox root is root (to build the tree), nobody is nobody
            # (otherwise the grader's own ids are nobody inside, and the namespace's
            # capabilities build the tree: no id inside is 0, whose mapping needs CAP_SETFCAP)
            _write(f"/proc/{child}/uid_map", "0 0 1\n65534 65534 1\n")
            _write(f"/proc/{child}/gid_map", "0 0 1\n65534 65534 1\n")
        else:
            _write(f"/proc/{child}/uid_map", f"65534 {uid} 1\n")
            _write(f"/proc/{child}/setgroups", "deny")
            _write(f"/proc/{child}/gid_map", f"65534 {gid} 1\n")
        os.write(mapped_w, b"m")
    except OSError as e:
        sys.stderr.write(f"backprop-ninja sandbox: cannot map the user namespace: {e}\n")
        os.kill(child, signal.SIGKILL)
        os._exit(EXIT_CONFINEMENT)
    _wait_and_exit(child)


def bwrap_args(plan: dict[str, Any]) -> list[str]:
    """The bubblewrap command line of the same confinement (see the module docstring)."""
    args = [plan["bwrap"], "--unshare-all", "--die-with-parent", "--new-session"]
    args += ["--as-pid-1", "--cap-drop", "ALL", "--hostname", "sandbox", "--clearenv"]
    for path in plan["binds"]:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in plan["hide"]:
        args += ["--tmpfs", path, "--remount-ro", path]
    args += ["--dev", "/dev", "--remount-ro", "/dev", "--proc", "/proc"]
    args += ["--ro-bind", "/proc/sys", "/proc/sys"]  # the sandbox's own sysctls stay as they are
    scratch = plan["tmp"]
    args += ["--size", str(int(plan["tmp_bytes"])), "--perms", "0700", "--tmpfs", scratch]
    if not plan.get("probe"):
        args += ["--ro-bind", plan["runner_copy"], "/runner"]
    args += ["--remount-ro", "/"]  # the new root itself: nothing written there survives
    for key, value in plan["env"].items():
        args += ["--setenv", key, value]
    args += ["--setenv", "HOME", scratch, "--setenv", "TMPDIR", scratch, "--chdir", scratch]
    if plan["nobody"]:
        args += ["--uid", "65534", "--gid", "65534"]
    if plan.get("probe"):
        return [*args, plan["python"], "-I", "-c", "pass"]
    return [*args, plan["python"], "-I", "-B", "/runner/runner.py"]


def launch_bwrap(plan: dict[str, Any]) -> None:
    _limits(plan)
    control = int(plan["control_fd"])
    if plan.get("probe"):
        os.execv(plan["bwrap"], bwrap_args(plan))
    if control != 3:
        os.dup2(control, 3)
    os.set_inheritable(3, True)
    os.closerange(4, 65536)
    os.execv(plan["bwrap"], bwrap_args(plan))


def launch_none(plan: dict[str, Any]) -> None:
    """No namespaces: rlimits only, and a scratch folder of the sandbox's own."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _limits(plan)
    runner = os.path.join(plan["runner_copy"], "runner.py")
    _exec_runner(plan, runner, plan["scratch"])


def join_cgroup(path: str | None) -> None:
    if path:
        _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))


def main() -> None:
    plan = json.loads(sys.argv[1])
    try:
        if plan.get("parent"):  # a grader killed outright takes its sandboxes along
            _die_with_parent(int(plan["parent"]))
        join_cgroup(plan.get("cgroup"))
        {"userns": launch_userns, "bwrap": launch_bwrap, "none": launch_none}[plan["mode"]](plan)
    except BaseException as e:
        _complain(e)
        os._exit(EXIT_CONFINEMENT)


if __name__ == "__main__":
    main()

"""Gradescope: the autograder zip, and the zip at work in a Gradescope-like layout.

The zip is built with ``backprop-ninja gradescope-autograder``, unpacked into
``/autograder/source`` of a private mount namespace (``unshare --mount``: this machine's root
with a folder of the test's own bind-mounted at ``/autograder``, entered with ``pivot_root``, as
root, as Gradescope runs it); its ``setup.sh`` installs the kit's wheel into a fresh
``/autograder/venv`` offline, from a local wheelhouse of the pinned versions (filled once by
``pip download``, then kept in pytest's cache), and its ``run_autograder`` grades
``/autograder/submission`` into ``/autograder/results/results.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autograder import __version__
from autograder.cli import main
from autograder.exercises import EXERCISES
from autograder.grading.submission import MAX_NOTEBOOK_BYTES
from autograder.integrations import gradescope_run
from autograder.integrations.gradescope_run import SETTINGS_FILE, Settings

from .conftest import REPO_ROOT
from .notebooks import SCATTER_BUG_CODE, make_notebook
from .unprivileged import skip_or_fail

pytestmark = pytest.mark.slow

ENTER = r"""#!/usr/bin/env bash
# enter NEWROOT AUTOGRADER CMD...: run CMD (under unshare --mount) with this machine's root, but
# AUTOGRADER mounted at /autograder, as Gradescope's container has it
set -euo pipefail
new="$1"; ag="$2"; shift 2
mount --make-rprivate /
mount -t tmpfs -o mode=0755 newroot "$new"
for entry in /*; do
  name="${entry#/}"
  case "$name" in proc|sys|dev|tmp|autograder) continue;; esac
  if [ -L "$entry" ]; then ln -s "$(readlink "$entry")" "$new/$name"
  elif [ -d "$entry" ]; then mkdir "$new/$name"; mount --rbind "$entry" "$new/$name"
  fi
done
mkdir "$new/proc" "$new/sys" "$new/dev" "$new/tmp" "$new/autograder" "$new/.old"
mount --rbind /proc "$new/proc"
mount --rbind /sys "$new/sys"
mount --rbind /dev "$new/dev"
mount --bind /tmp "$new/tmp"
mount --bind "$ag" "$new/autograder"
cd "$new"
pivot_root . .old
umount -l /.old
rmdir /.old
cd /autograder
exec "$@"
"""

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build(tmp: Path, *options: str) -> Path:
    """``backprop-ninja gradescope-autograder -o ZIP OPTIONS``; the zip."""
    out = tmp / "autograder.zip"
    assert main(["gradescope-autograder", "-o", str(out), *options]) == 0
    return out


def unpack(bundle: Path, into: Path) -> None:
    """Unpack as Gradescope does, keeping each file's mode."""
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            target = into / info.filename
            target.write_bytes(z.read(info))
            target.chmod(stat.S_IMODE(info.external_attr >> 16) or 0o644)


# --- the zip ----------------------------------------------------------------------------------


def test_the_zip_holds_setup_run_autograder_the_wheel_and_the_pinned_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = build(tmp_path, "--assignment", "cross_entropy_backward", "--seed", "7")
    printed = capsys.readouterr().out
    assert "cross_entropy_backward" in printed and "seed 7" in printed and "sandbox" in printed
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in z.infolist()}
        setup = z.read("setup.sh").decode()
        run = z.read("run_autograder").decode()
        settings = Settings.from_text(z.read(SETTINGS_FILE).decode())
        constraints = z.read("constraints.txt").decode()
        wheel_name = next(n for n in names if n.endswith(".whl"))
        wheel = z.read(wheel_name)
    assert {"setup.sh", "run_autograder", "constraints.txt", SETTINGS_FILE} <= set(names)
    assert all("/" not in n for n in names)  # everything at the zip's root
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert wheel_name == f"backprop_ninja-{__version__}-py3-none-any.whl"
    assert setup.startswith("#!/usr/bin/env bash") and run.startswith("#!/usr/bin/env bash")
    assert "https://download.pytorch.org/whl/cpu" in setup  # torch's CPU build on Gradescope
    assert '-c "$source_dir/constraints.txt"' in setup and wheel_name in setup
    assert "bubblewrap" in setup and "/autograder/results/results.json" in run
    assert "torch==2.13.0" in constraints.splitlines()
    assert settings == Settings("cross_entropy_backward", 7, "visible", "fallback", 10.0, 60.0,
                                __version__)  # fmt: skip
    wheel_path = tmp_path / wheel_name
    wheel_path.write_bytes(wheel)
    with zipfile.ZipFile(wheel_path) as w:
        inside = set(w.namelist())
    for needed in (
        "autograder/integrations/gradescope_run.py",
        "autograder/sandbox/runner.py",
        "autograder/exercises/data/lecture_batch.json",
    ):
        assert needed in inside
    assert not any("__pycache__" in n for n in inside)


def test_an_unknown_assignment_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["gradescope-autograder", "-o", str(tmp_path / "a.zip"), "--assignment", "ex9"])
    assert code == 2 and "backprop_ninja" in capsys.readouterr().err
    assert not (tmp_path / "a.zip").exists()


def test_finding_the_submission_names_what_is_wrong(tmp_path: Path) -> None:
    find = gradescope_run.find_submission
    assert "No files were submitted" in str(find(tmp_path / "none", None))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "answers.py").write_text("x = 1")
    assert "holds: answers.py" in str(find(tmp_path / "s", None))
    for name in ("backprop_ninja.ipynb", "copy.ipynb", ".ipynb_checkpoints/x.ipynb"):
        (tmp_path / "s" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "s" / name).write_text("{}")
    assert "2 notebooks" in str(find(tmp_path / "s", None))
    (tmp_path / "s" / "passwd.ipynb").symlink_to("/etc/passwd")  # never read through a link
    (tmp_path / "s" / "._copy.ipynb").write_bytes(b"\0\5\26\7")  # macOS's zip debris
    assert "2 notebooks" in str(find(tmp_path / "s", None))
    assert find(tmp_path / "s", "backprop_ninja") == tmp_path / "s" / "backprop_ninja.ipynb"
    (tmp_path / "s" / "copy.ipynb").unlink()
    assert find(tmp_path / "s", None) == tmp_path / "s" / "backprop_ninja.ipynb"
    with open(tmp_path / "s" / "backprop_ninja.ipynb", "wb") as f:  # sparse: refused unread
        f.truncate(MAX_NOTEBOOK_BYTES + 1)
    assert "too large" in str(find(tmp_path / "s", "backprop_ninja"))


# --- the child's sandbox policy, in-process --------------------------------------------------


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where neither user namespaces nor bubblewrap work (Docker's default seccomp)."""
    from autograder.sandbox import pool

    real = pool.choose_mode

    def choose(requested: str = "auto") -> Any:
        if requested == "none":
            return real("none")
        raise pool.SandboxUnavailable("no sandbox can be set up on this machine (test)")

    monkeypatch.setattr(pool, "choose_mode", choose)


def test_without_a_sandbox_a_confined_child_says_so_and_an_unconfined_one_grades(
    tmp_path: Path, no_sandbox: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    make_notebook(tmp_path / "backprop_ninja.ipynb", {"dC": SCATTER_BUG_CODE})
    out = tmp_path / "confined.json"
    assert gradescope_run.child("backprop_ninja.ipynb", out, Settings(seed=3), "confined") == 0
    assert "no sandbox can be set up" in json.loads(out.read_text())["no-sandbox"]
    out = tmp_path / "none.json"
    assert gradescope_run.child("backprop_ninja.ipynb", out, Settings(seed=3), "none") == 0
    data = json.loads(out.read_text())
    assert data["confinement"] == "none" and data["run"]["submissions"][0]["score"] == 25


def test_the_children_tried_follow_the_sandbox_policy() -> None:
    attempts = gradescope_run.attempts
    nobody, root = ("confined", True), ("confined", False)
    assert attempts("fallback", root=True) == [nobody, root, ("none", True)]
    assert attempts("fallback", root=False) == [nobody, ("none", True)]
    assert attempts("required", root=True) == [nobody, root]
    assert attempts("none", root=True) == [("none", True)]


# --- the zip at work, as Gradescope runs it --------------------------------------------------


def _missing() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs root on Linux (Gradescope runs the autograder as root)"
    for tool in ("unshare", "pivot_root", "mount"):
        if not shutil.which(tool, path=PATH):
            return f"needs {tool} (util-linux)"
    return None


def wheelhouse(cache: Path, wheel: Path) -> Path:
    """A folder of wheels of every pinned version the kit needs: filled once with ``pip
    download``, then used offline (``--no-index``)."""
    cache.mkdir(parents=True, exist_ok=True)
    offline = ["--no-index", "--find-links", str(cache)]
    base = [sys.executable, "-m", "pip", "download", "-q", "-d", str(cache)]
    base += ["-c", str(REPO_ROOT / "constraints.txt"), str(wheel)]
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    if subprocess.run([*base, *offline], capture_output=True, env=env).returncode != 0:
        fetched = subprocess.run(base, capture_output=True, text=True, env=env)
        if fetched.returncode != 0:
            skip_or_fail(f"the pinned wheels are not here and cannot be fetched: {fetched.stderr}")
    for own in cache.glob("backprop_ninja-*.whl"):
        own.unlink()  # the bundle brings its own
    return cache


class Gradescope:
    """``/autograder`` of a Gradescope-like container: the bundle's source, the venv that
    ``setup.sh`` built, a submission folder, a results folder."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "autograder"
        self.newroot = base / "newroot"
        self.enter = base / "enter.sh"
        for d in (self.root / "source", self.root / "submission", self.root / "results"):
            d.mkdir(parents=True)
        self.newroot.mkdir()
        self.root.chmod(0o755)
        self.enter.write_text(ENTER)
        self.entry = [
            "unshare",
            "--mount",
            "bash",
            str(self.enter),
            str(self.newroot),
            str(self.root),
        ]

    def run(self, command: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
        """``command`` (bash) as root inside the container; its output (stdout and stderr)."""
        proc = subprocess.run(
            [*self.entry, "bash", "-c", command],
            env={"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout
        return proc.stdout

    def settings(self, bundle: Path) -> None:
        """Use the settings of another bundle of the same kit (its wheel is installed)."""
        with zipfile.ZipFile(bundle) as z:
            (self.root / "source" / SETTINGS_FILE).write_bytes(z.read(SETTINGS_FILE))

    def grade(self, files: dict[str, bytes | Path]) -> tuple[dict[str, Any], str]:
        """Submit ``files`` (name -> content or a file to copy), run ``run_autograder`` as
        Gradescope does, return results.json and the log."""
        for folder in (self.root / "submission", self.root / "results"):
            shutil.rmtree(folder)
            folder.mkdir()
        for name, content in files.items():
            target = self.root / "submission" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copyfile(content, target)
            else:
                target.write_bytes(content)
        log = self.run(
            "cp /autograder/source/run_autograder /autograder/run_autograder && "
            "/autograder/run_autograder"
        )
        results = json.loads((self.root / "results" / "results.json").read_text())
        return results, log


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``bundles(*options)``: the zip ``gradescope-autograder`` builds with these options, built
    once per module (each build packs the kit into a wheel)."""
    made: dict[tuple[str, ...], Path] = {}

    def get(*options: str) -> Path:
        if options not in made:
            made[options] = build(tmp_path_factory.mktemp("bundle"), *options)
        return made[options]

    return get


@pytest.fixture(scope="module")
def gradescope(
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
    bundles: Callable[..., Path],
) -> Iterator[Gradescope]:
    """The default bundle, set up by its own ``setup.sh`` (offline, no apt)."""
    reason = _missing()
    if reason:
        skip_or_fail(reason)
    base = tmp_path_factory.mktemp("gradescope")
    bundle = bundles("--seed", "5")
    gs = Gradescope(base)
    unpack(bundle, gs.root / "source")
    wheel = next((gs.root / "source").glob("*.whl"))
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    folder = cache.mkdir("gradescope-wheelhouse") if cache else base / "wheelhouse"
    house = wheelhouse(Path(folder), wheel)
    env = {
        "BACKPROP_NINJA_APT": "0",  # the packages setup.sh would install are on this machine
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(house),
    }
    log = gs.run("bash /autograder/source/setup.sh", env=env)
    assert "setup.sh: kit" in log and (gs.root / "venv" / "bin" / "backprop-ninja").exists()
    try:
        yield gs
    finally:
        shutil.rmtree(gs.root / "venv", ignore_errors=True)  # 1 GB of torch


def test_a_notebook_is_graded_into_results_json_with_one_test_per_step(
    gradescope: Gradescope, bundles: Callable[..., Path]
) -> None:
    gradescope.settings(bundles("--seed", "5"))
    buggy = REPO_ROOT / "examples" / "buggy" / "backprop_ninja.ipynb"
    results, log = gradescope.grade({"backprop_ninja.ipynb": buggy})
    tests = results["tests"]
    assert [t["name"] for t in tests] == [s.name for s in EXERCISES["backprop_ninja"].steps]
    failed = {t["name"]: t for t in tests if t["status"] == "failed"}
    assert set(failed) == {"dcounts", "dbndiff2", "dbnmeani", "dC"}
    assert results["score"] == 22 == sum(t["score"] for t in tests)
    assert "[scatter-drops-duplicates]" in failed["dC"]["output"]
    assert "What failed:" in failed["dC"]["output"] and "repeats (" in failed["dC"]["output"]
    assert all(t["visibility"] == "visible" for t in tests)
    assert results["stdout_visibility"] == "hidden" and "seed 5" in results["output"]
    assert "confinement: userns" in log or "confinement: bwrap" in log
    assert "as uid 0" in log and "grader: uid 65534" in log  # the grader itself as nobody
    json.dumps(results, allow_nan=False)


def test_the_exercise_comes_from_the_notebook_or_the_assignment(
    gradescope: Gradescope, bundles: Callable[..., Path], tmp_path: Path
) -> None:
    ce = EXERCISES["cross_entropy_backward"]
    nb = make_notebook(tmp_path / "cross_entropy_backward.ipynb", exercise=ce)
    gradescope.settings(bundles("--seed", "5"))
    results, _ = gradescope.grade({"--mode=none.ipynb": nb})  # a name like an option: a name
    assert [t["name"] for t in results["tests"]] == ["dlogits"] and results["score"] == 1
    assert f"Graded as {ce.text.title} (cross_entropy_backward)" in results["output"]

    gradescope.settings(bundles("--assignment", "backprop_ninja"))
    results, _ = gradescope.grade({"cross_entropy_backward.ipynb": nb})
    assert results["score"] == 0 and results["tests"] == []
    assert "this assignment is Becoming a backprop ninja: Exercise 1" in results["output"]
    assert "submit your backprop_ninja.ipynb" in results["output"]


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"backprop_ninja.ipynb": b"{not json"}, "could not be read"),
        ({"backprop_ninja.ipynb": b""}, "the file is empty"),
        ({"answers.py": b"dC = 0"}, "No Jupyter notebook (.ipynb file) was found"),
        ({"a.ipynb": b"{}", "b.ipynb": b"{}"}, "holds 2 notebooks"),
        ({"notes.ipynb": b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'},
         "No answer of Becoming a backprop ninja: Exercise 1 was found"),
    ],
    ids=["not-json", "empty", "no-notebook", "two-notebooks", "not-the-released-notebook"],
)  # fmt: skip
def test_a_broken_submission_gets_score_0_and_the_reason_never_a_traceback(
    gradescope: Gradescope, bundles: Callable[..., Path], files: dict[str, bytes], says: str
) -> None:
    gradescope.settings(bundles("--seed", "5"))
    results, log = gradescope.grade(files)  # type: ignore[arg-type]
    assert results["score"] == 0 and says in results["output"], results
    assert "Traceback" not in json.dumps(results) and "Traceback" not in log


def test_a_bundle_built_without_a_sandbox_grades_the_same_as_an_unprivileged_user(
    gradescope: Gradescope, bundles: Callable[..., Path], tmp_path: Path
) -> None:
    gradescope.settings(bundles("--seed", "5", "--sandbox", "none"))
    nb = make_notebook(
        tmp_path / "backprop_ninja.ipynb",
        {
            "dC": SCATTER_BUG_CODE,
            # right, once it has checked whose rights it runs with (which costs the step: an
            # answer that opens a file is tampering, and said to be after right values only)
            "dlogprobs": "assert 'Uid:\\t65534\\t' in open('/proc/self/status').read()\n"
            "dlogprobs = torch.zeros_like(logprobs)\ndlogprobs[range(n), Yb] = -1.0/n",
        },
    )
    results, log = gradescope.grade({"backprop_ninja.ipynb": nb})
    assert "confinement: none (the bundle was built with --sandbox none)" in log
    assert "grader: uid 65534" in log
    assert results["score"] == 24
    dlogprobs = results["tests"][0]
    assert dlogprobs["name"] == "dlogprobs" and dlogprobs["status"] == "failed", dlogprobs
    assert "[tampering]" in dlogprobs["output"] and "`open`" in dlogprobs["output"], dlogprobs
    assert "AssertionError" not in dlogprobs["output"], dlogprobs


def test_a_grader_that_cannot_start_still_leaves_a_results_file(
    gradescope: Gradescope, tmp_path: Path
) -> None:
    (gradescope.root / "source" / SETTINGS_FILE).write_text("{broken")
    results, log = gradescope.grade({"backprop_ninja.ipynb": b"{}"})
    assert results["score"] == 0 and "not your fault" in results["output"]
    assert "Traceback" in log  # for the instructor, in the autograder output

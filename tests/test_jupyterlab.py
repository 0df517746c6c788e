"""The released notebook opens in JupyterLab, in a real browser, without being modified.

JupyterLab writes the kernel's description into a notebook when the kernel starts; a notebook
that does not already hold exactly that is marked modified the moment it opens, which tells a
student they changed something they did not. Drives JupyterLab on the loopback interface with
Debian's Chromium through playwright (installed by ``.ci/browser.sh``); without them the test
skips, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import paths
from autograder.exercises import EXERCISES

from .test_browser import CHROMIUM, FLAGS, _missing

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on 127.0.0.1 serving a folder with the released notebooks:
    (base address with token, the folder)."""
    why = _missing()
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why} (run `bash .ci/browser.sh`)")
        pytest.skip(f"{why} (run `bash .ci/browser.sh` to install it)")
    root = tmp_path_factory.mktemp("lab")
    for ex in EXERCISES.values():
        shutil.copy(REPO_ROOT / paths(ex)["release"], root / f"{ex.id}.ipynb")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(8)
    jupyter = Path(sys.executable).parent / "jupyter"
    server = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
            "--allow-root",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=root,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/lab/tree/{{name}}?token={token}", root
    finally:
        server.terminate()
        try:  # a server shutting down its kernels on busy cores may take its time: then kill
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_released_notebook_opens_unmodified_with_its_kernel_running(
    lab: tuple[str, Path],
) -> None:
    from playwright.sync_api import sync_playwright

    address, _ = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(address.format(name="backprop_ninja.ipynb"))
            page.wait_for_selector(".jp-Notebook", timeout=120_000)
            indicator = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
            page.wait_for_selector(indicator, timeout=120_000)  # the kernel has started
            page.wait_for_timeout(2000)  # and told JupyterLab about itself
            dirty = page.locator(".lm-TabBar-tab.jp-mod-dirty").count()
            title = page.locator(".lm-TabBar-tab.jp-mod-current").inner_text()
        finally:
            browser.close()
    assert "backprop_ninja.ipynb" in title
    assert dirty == 0, "JupyterLab marked the released notebook modified as it opened"


def test_every_released_notebook_describes_the_same_kernel() -> None:
    first = None
    for ex in EXERCISES.values():
        meta = nbformat.read(str(REPO_ROOT / paths(ex)["release"]), as_version=4).metadata
        described = (meta["kernelspec"], meta["language_info"])
        first = first or described
        assert described == first, ex.id

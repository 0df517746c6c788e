"""The report and a feedback page open in a real browser, offline, and draw.

Drives Debian's Chromium (``/usr/bin/chromium``) headless through playwright; ``.ci/browser.sh``
installs both. Without them the tests skip, except under CI (``CI`` set), where they fail.
Set ``BACKPROP_NINJA_SCREENSHOTS=DIR`` to keep the screenshots for a look.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageStat

from autograder.reports import report

from .test_report import mixed_exercises_run, mixed_run, untouched_result

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed"
    if not CHROMIUM.exists():
        return f"Chromium is not installed at {CHROMIUM}"
    return None


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The report of a mixed run and its feedback pages, written as the CLI writes them."""
    out = tmp_path_factory.mktemp("report")
    run = mixed_run()
    report.write_report(run, out / "report.html", out / "students")
    bob = run.submissions[1].path  # failing dC (with the row strip) and dcounts
    untouched = untouched_result("submitted/dan/backprop_ninja.ipynb")
    (out / "untouched.html").write_text(report.render_feedback(untouched, run.seed))
    report.write_report(mixed_exercises_run(), out / "mixed.html")
    return {
        "report": out / "report.html",
        "feedback": out / "students" / report.feedback_filename(bob),
        "untouched": out / "untouched.html",
        "mixed": out / "mixed.html",
    }


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium context with a fresh profile."""
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: the browser test must run in CI; run `bash .ci/browser.sh`")
        pytest.skip(f"{reason} (run `bash .ci/browser.sh` to install it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
            offline=True,
        )
        try:
            yield context
        finally:
            context.close()


class _Visit:
    """A page opened from a file:// URL, with everything it logged and requested."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri(), wait_until="load", timeout=30_000)

    def screenshot(self, name: str) -> Image.Image:
        png = self.page.screenshot(full_page=True)
        keep = os.environ.get("BACKPROP_NINJA_SCREENSHOTS")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"{name}.png").write_bytes(png)
        return Image.open(io.BytesIO(png)).convert("L")

    def images_drawn(self) -> int:
        """How many <img> decoded to a picture (0 if any failed to)."""
        return int(
            self.page.evaluate(
                "() => { const imgs = Array.from(document.images);"
                " return imgs.every(i => i.complete && i.naturalWidth > 0) ? imgs.length : 0; }"
            )
        )


def _assert_drawn(visit: _Visit, name: str, figures: int) -> None:
    assert visit.images_drawn() == figures
    shot = visit.screenshot(name)
    assert shot.height > 900  # the full page, taller than the window
    assert ImageStat.Stat(shot).stddev[0] > 20, "the screenshot is (nearly) blank"
    assert visit.errors == []
    assert all(url.startswith(("file:", "data:")) for url in visit.requests), visit.requests


def test_report_opens_offline_and_draws_its_figures(browser: Any, pages: dict[str, Path]) -> None:
    visit = _Visit(browser, pages["report"])
    _assert_drawn(visit, "report", figures=3)
    assert visit.page.locator("table.students tbody tr").count() == 4


def test_clicking_a_header_sorts_the_table(browser: Any, pages: dict[str, Path]) -> None:
    visit = _Visit(browser, pages["report"])
    table = visit.page.locator("table.students")

    def scores() -> list[float]:
        return [float(s) for s in table.locator("tbody tr td:nth-child(2)").all_inner_texts()]

    assert scores() == [26, 24, 24, 0]  # by score, then path
    table.locator("thead th", has_text="score").click()
    assert scores() == [0, 24, 24, 26]
    table.locator("thead th", has_text="score").click()
    assert scores() == [26, 24, 24, 0]
    table.locator("thead th", has_text="submission").click()
    paths = table.locator("tbody tr td:first-child").all_inner_texts()
    assert paths == sorted(paths, key=str.lower)
    assert visit.errors == []


def test_feedback_page_opens_offline_and_draws_the_graph_and_row_strip(
    browser: Any, pages: dict[str, Path]
) -> None:
    visit = _Visit(browser, pages["feedback"])
    _assert_drawn(visit, "feedback", figures=2)
    assert visit.page.locator("article.step").count() == 2


def test_an_untouched_notebooks_feedback_is_one_screen_of_graph_and_one_line(
    browser: Any, pages: dict[str, Path]
) -> None:
    visit = _Visit(browser, pages["untouched"])
    assert visit.images_drawn() == 1 and visit.errors == []
    assert visit.page.locator("article.step").count() == 0
    height = visit.page.evaluate("document.documentElement.scrollHeight")
    assert height < 1600, height  # the graph's height, not 26 cards
    assert visit.page.locator("p.unstarted").count() == 1


def test_a_report_of_every_exercise_draws_a_section_each(
    browser: Any, pages: dict[str, Path]
) -> None:
    visit = _Visit(browser, pages["mixed"])
    _assert_drawn(visit, "mixed", figures=10)
    assert visit.page.locator("section").count() == 4
    assert visit.page.locator("table.students").count() == 4

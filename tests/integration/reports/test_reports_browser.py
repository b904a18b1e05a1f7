"""The report renders in headless Chromium with no script errors and a non-trivial screenshot, and its
decisive columns fit a 1,400 px window (playwright over Debian's chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

from analysis.run.summary import RunSummary
from reports.build import build_report
from reports.compare_build import build_comparison
from tests.golden.builders import stepped_run
from tests.golden.fixtures import golden_copy

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
VIEWPORT_PX = {"width": 1400, "height": 1000}
SCREENSHOT_PX = {"width": 1400, "height": 4000}
DECISIVE_STEP_COLUMNS = ("goodput", "p99", "meets_slo", "bottleneck")
DECISIVE_METRICS = ("qps", "p99_ms")
# Per cell: where it lies; per table: whether its scrolling box has to scroll sideways to show it.
_GEOMETRY_JS = """(selector) => Array.from(document.querySelectorAll(selector)).map((cell) => {
  const box = cell.getBoundingClientRect();
  const holder = cell.closest('table').parentElement;
  return {text: cell.textContent.trim(), left: box.left, right: box.right,
          scroll_px: holder.scrollWidth - holder.clientWidth};
})"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """One headless Chromium for the module (each start costs a second or two of CPU); a page per check."""
    assert CHROMIUM.is_file(), "chromium missing: run `make system-deps` (Debian package chromium)"
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport=VIEWPORT_PX,
        )  # fmt: skip
        try:
            yield context
        finally:
            context.close()


def assert_renders(html: Path, browser: BrowserContext, tmp_path: Path) -> None:
    """Opened at 1,400 px the page reports no script error, no broken image and no sideways scroll; a
    1,400 x 4,000 px screenshot of it is more than an empty page."""
    page = browser.new_page()
    try:
        page.goto(html.as_uri())
        check = page.locator("#render-check")
        status, errors, overflow = (
            check.get_attribute(name) for name in ("data-status", "data-errors", "data-overflow-px")
        )
        assert (status, errors) == ("ok", "0"), f"render check {status}, {errors}: {check.text_content()}"
        assert overflow == "0", f"the page scrolls sideways at 1,400 px by {overflow} px"
        page.set_viewport_size(SCREENSHOT_PX)
        shot = tmp_path / f"{html.stem}.png"
        page.screenshot(path=str(shot))
    finally:
        page.close()
    assert shot.is_file() and shot.stat().st_size > 50_000


@pytest.mark.browser
def test_run_report_renders(tmp_path: Path, browser: BrowserContext) -> None:
    folder = golden_copy("compare_base", tmp_path)
    assert_renders(build_report(folder, lang="zh"), browser, tmp_path)


@pytest.mark.browser
def test_dead_target_report_renders(tmp_path: Path, browser: BrowserContext) -> None:
    folder = stepped_run(tmp_path / "dead", [1, 5], 8.0, qps_per_user=50.0, refused=True)
    assert_renders(build_report(folder), browser, tmp_path)


@pytest.mark.browser
def test_comparison_renders(tmp_path: Path, browser: BrowserContext) -> None:
    base = golden_copy("compare_base", tmp_path)
    cand = golden_copy("compare_faster", tmp_path)
    path, _ = build_comparison(base, [cand])
    assert_renders(path, browser, tmp_path)


def cell_geometry(html: Path, browser: BrowserContext, selector: str) -> tuple[list[dict[str, Any]], int]:
    """Geometry of the cells `selector` matches in `html` opened at 1,400 x 1,000 px, and the viewport width."""
    page = browser.new_page()
    try:
        page.goto(html.as_uri())
        width = int(page.evaluate("window.innerWidth"))
        return page.evaluate(_GEOMETRY_JS, selector), width
    finally:
        page.close()


def assert_in_view(cells: list[dict[str, Any]], width: int) -> None:
    outside = [c for c in cells if c["left"] < 0 or c["right"] > width]
    assert outside == [], f"cells beyond the {width} px viewport: {outside}"
    scrolled = [c for c in cells if c["scroll_px"] > 0]
    assert scrolled == [], f"a table scrolls sideways to show: {scrolled}"


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_decisive_step_columns_visible_at_1400_px(tmp_path: Path, browser: BrowserContext, lang: str) -> None:
    """Goodput, P99, meets-SLO and the bottleneck of every step are on screen without scrolling."""
    folder = golden_copy("compare_base", tmp_path)  # 4 steps with device telemetry and an errored step
    html = build_report(folder, lang=lang)
    summary = RunSummary.model_validate_json((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    assert len(summary.steps) >= 4 and any(
        s.telemetry.device_util_mean_pct is not None for s in summary.steps
    )
    text = html.read_text(encoding="utf-8")
    assert 'id="bottlenecks"' in text and 'id="telemetry"' in text
    for column in DECISIVE_STEP_COLUMNS:
        cells, width = cell_geometry(html, browser, f'#steps-table td[data-col="{column}"]')
        assert len(cells) == len(summary.steps), column
        assert all(c["text"] for c in cells), column
        assert_in_view(cells, width)


@pytest.mark.browser
def test_compare_p99_and_goodput_rows_visible_at_1400_px(tmp_path: Path, browser: BrowserContext) -> None:
    """Metric, baseline, candidate, change and verdict of P99 and goodput, every step: no sideways scroll."""
    base = golden_copy("compare_base", tmp_path)
    cand = golden_copy("compare_faster", tmp_path)
    path, comparison = build_comparison(base, [cand])
    n_scopes = len(comparison.candidates[0].steps)
    assert n_scopes >= 4
    for metric in DECISIVE_METRICS:
        cells, width = cell_geometry(path, browser, f'table.changes tr[data-metric="{metric}"] > td')
        # every step's row: metric, baseline, candidate, change, CI, verdict (+ the step cell on its first row)
        assert len(cells) >= 6 * n_scopes, (metric, len(cells))
        assert_in_view(cells, width)

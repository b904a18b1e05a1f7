"""The report renders in headless Chromium with no script errors and a non-trivial screenshot, and its
decisive columns fit a 1,400 px window (playwright over Debian's chromium)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from analysis.run.summary import RunSummary
from reports.build import build_report
from reports.compare_build import build_comparison
from tests.golden.builders import stepped_run
from tests.golden.fixtures import golden_copy

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
TIMEOUT_S = 90


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM.is_file(), "chromium missing: run `make system-deps` (Debian package chromium)"
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def assert_renders(html: Path, tmp_path: Path) -> None:
    dom = chromium(["--dump-dom", "--window-size=1400,1000", html.as_uri()], tmp_path / "profile-dom")
    match = re.search(r'id="render-check"[^>]*', dom.stdout)
    assert match, f"render check missing from the DOM: {dom.stderr[-2000:]}"
    assert 'data-status="ok"' in match.group(0), match.group(0)
    assert 'data-errors="0"' in match.group(0)
    assert 'data-overflow-px="0"' in match.group(0), (
        f"the page scrolls sideways at 1,400 px: {match.group(0)}"
    )
    shot = tmp_path / f"{html.stem}.png"
    chromium([f"--screenshot={shot}", "--window-size=1400,4000", html.as_uri()], tmp_path / "profile-shot")
    assert shot.is_file() and shot.stat().st_size > 50_000


@pytest.mark.browser
def test_run_report_renders(tmp_path) -> None:
    folder = golden_copy("compare_base", tmp_path)
    assert_renders(build_report(folder, lang="zh"), tmp_path)


@pytest.mark.browser
def test_dead_target_report_renders(tmp_path) -> None:
    folder = stepped_run(tmp_path / "dead", [1, 5], 8.0, qps_per_user=50.0, refused=True)
    assert_renders(build_report(folder), tmp_path)


@pytest.mark.browser
def test_comparison_renders(tmp_path) -> None:
    base = golden_copy("compare_base", tmp_path)
    cand = golden_copy("compare_faster", tmp_path)
    path, _ = build_comparison(base, [cand])
    assert_renders(path, tmp_path)


VIEWPORT_PX = {"width": 1400, "height": 1000}
DECISIVE_STEP_COLUMNS = ("goodput", "p99", "meets_slo", "bottleneck")
DECISIVE_METRICS = ("qps", "p99_ms")
# Per cell: where it lies; per table: whether its scrolling box has to scroll sideways to show it.
_GEOMETRY_JS = """(selector) => Array.from(document.querySelectorAll(selector)).map((cell) => {
  const box = cell.getBoundingClientRect();
  const holder = cell.closest('table').parentElement;
  return {text: cell.textContent.trim(), left: box.left, right: box.right,
          scroll_px: holder.scrollWidth - holder.clientWidth};
})"""


def cell_geometry(html: Path, tmp_path: Path, selector: str) -> tuple[list[dict[str, Any]], int]:
    """Geometry of the cells `selector` matches in `html` opened at 1,400 x 1,000 px, and the viewport width."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile-geometry"), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport=VIEWPORT_PX,
        )  # fmt: skip
        try:
            page = browser.new_page()
            page.goto(html.as_uri())
            width = int(page.evaluate("window.innerWidth"))
            return page.evaluate(_GEOMETRY_JS, selector), width
        finally:
            browser.close()


def assert_in_view(cells: list[dict[str, Any]], width: int) -> None:
    outside = [c for c in cells if c["left"] < 0 or c["right"] > width]
    assert outside == [], f"cells beyond the {width} px viewport: {outside}"
    scrolled = [c for c in cells if c["scroll_px"] > 0]
    assert scrolled == [], f"a table scrolls sideways to show: {scrolled}"


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_decisive_step_columns_visible_at_1400_px(tmp_path: Path, lang: str) -> None:
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
        cells, width = cell_geometry(html, tmp_path, f'#steps-table td[data-col="{column}"]')
        assert len(cells) == len(summary.steps), column
        assert all(c["text"] for c in cells), column
        assert_in_view(cells, width)


@pytest.mark.browser
def test_compare_p99_and_goodput_rows_visible_at_1400_px(tmp_path: Path) -> None:
    """Metric, baseline, candidate, change and verdict of P99 and goodput, every step: no sideways scroll."""
    base = golden_copy("compare_base", tmp_path)
    cand = golden_copy("compare_faster", tmp_path)
    path, comparison = build_comparison(base, [cand])
    n_scopes = len(comparison.candidates[0].steps)
    assert n_scopes >= 4
    for metric in DECISIVE_METRICS:
        cells, width = cell_geometry(path, tmp_path, f'table.changes tr[data-metric="{metric}"] > td')
        # every step's row: metric, baseline, candidate, change, CI, verdict (+ the step cell on its first row)
        assert len(cells) >= 6 * n_scopes, (metric, len(cells))
        assert_in_view(cells, width)

"""The report renders in headless Chromium with no script errors and a non-trivial screenshot."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

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

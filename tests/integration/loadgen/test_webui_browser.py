"""The Locust web UI as embedperf's front end, driven in headless Chromium (Debian's, through playwright).

A run is started from the form with a chosen scenario and overrides; the live tab shows the
(fake) NPU's figures and the server decomposition while it runs; the run folder and the report
link appear when it ends.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from embedperf.schema import RunFolder, read_manifest, read_requests_table
from loadgen.processes.stub_target import running_stub
from tests.conftest import free_port, stop_process
from tests.integration.reports.test_reports_browser import CHROMIUM, FLAGS

REPO_ROOT = Path(__file__).resolve().parents[3]
FAKE_NPU_SMI = REPO_ROOT / "tests" / "fakes" / "npu_smi.py"
WAIT_MS = 90_000  # a guard against a hang, not a performance bound


@pytest.fixture
def locust_ui(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`locust -f locustfiles/ramp.py` with its web UI on a free loopback port, against the stub."""
    port = free_port()
    runs = tmp_path / "runs"
    env = dict(os.environ, EMBEDPERF_NPU_SMI=str(FAKE_NPU_SMI), FAKE_NPU_IDS="0", FAKE_NPU_WATCH_INTERVAL_S="0.5")
    with running_stub("--delay-ms", "3") as target, open(tmp_path / "locust.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", "locustfiles/ramp.py", "--web-host", "127.0.0.1",
             "--web-port", str(port), "--host", target, "--runs-dir", str(runs)],
            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            yield f"http://127.0.0.1:{port}", runs
        finally:
            stop_process(proc)  # type: ignore[arg-type]


def open_ui(page: Page, url: str) -> None:
    for _ in range(200):  # until Locust's web server answers
        try:
            page.goto(url)
            return
        except Exception:  # noqa: BLE001 - playwright raises its own Error while nothing listens
            page.wait_for_timeout(300)
    raise AssertionError(f"the Locust web UI never answered at {url}")


@pytest.mark.browser
def test_start_from_the_ui_see_live_device_figures_get_a_run_folder(tmp_path: Path, locust_ui) -> None:
    assert CHROMIUM.is_file(), "chromium missing: run `make system-deps` (Debian package chromium)"
    url, runs = locust_ui
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(CHROMIUM), headless=True, args=FLAGS
        )
        page = browser.new_page()
        open_ui(page, url)
        # the shape sets the users: Locust's user-count fields are disabled, not silently ignored
        expect(page.locator("input[name=userCount]")).to_be_disabled(timeout=WAIT_MS)
        page.get_by_text("Custom parameters").click()
        options = page.locator("select[name=scenario] option").all_inner_texts()
        assert "smoke" in options and "ramp" in options and "openloop" not in options
        page.select_option("select[name=scenario]", "smoke")
        page.fill("input[name=scenarioSet]", "steps.duration_s=5")
        page.fill("input[name=label]", "ui")
        page.get_by_role("button", name="Start").click()

        page.get_by_role("tab", name="embedperf live").click()
        table = page.locator("table")
        expect(table).to_contain_text(re.compile(r"npu0\S* (device|aicore)_util_pct"), timeout=WAIT_MS)
        expect(table).to_contain_text("server compute ms (mean)", timeout=WAIT_MS)
        expect(table).to_contain_text(re.compile(r"npu0\S* power_w"))
        expect(table).to_contain_text("-smoke-ui")  # the run folder, named after the form's choices

        live = httpx.get(f"{url}/embedperf/live", timeout=10).json()
        for _ in range(600):  # the UI stops polling when the run stops; wait for the run folder to close
            if live["finished"]:
                break
            page.wait_for_timeout(200)
            live = httpx.get(f"{url}/embedperf/live", timeout=10).json()
        page.reload()  # a stopped run's page: the live tab and Download Data name the run folder and report
        page.get_by_role("tab", name="embedperf live").click()
        expect(page.locator("table")).to_contain_text("embedperf/report", timeout=WAIT_MS)
        expect(page.locator("table")).to_contain_text("finished")
        page.get_by_role("tab", name="Download Data").click()
        run_id = Path(live["run_folder"]).name
        expect(page.get_by_role("link", name=f"embedperf report of {run_id} (report.html)")).to_be_visible()
        browser.close()

    assert live["finished"] is True and live["report"] == "/embedperf/report"
    folder = RunFolder(Path(live["run_folder"]))
    assert folder.root.parent == runs and folder.run_id.endswith("-smoke-ui")
    manifest = read_manifest(folder)
    assert manifest.complete and [s.label for s in manifest.stages] == ["u1", "u4"]
    assert manifest.scenario.steps[0].duration_s == 5.0  # the override typed into the form
    rows = read_requests_table(folder).to_pandas()
    last = rows[rows.stage_index == 1]
    assert live["step"]["index"] == 1 and live["step"]["requests"] == len(last)
    assert live["step"]["ok"] == int(last.ok.sum())
    assert live["step"]["server_mean_ms"]["compute"] == pytest.approx(last[last.ok].srv_compute_ms.mean())
    assert {d["device"].split(".")[0] for d in live["devices"]} == {"npu0"}
    report = httpx.get(f"{url}/embedperf/report", timeout=300)
    assert report.status_code == 200 and "<html" in report.text[:500].lower()
    assert folder.report.is_file()

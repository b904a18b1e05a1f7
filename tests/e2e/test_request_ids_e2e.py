"""A request from a report's slowest-requests list is found in the target's log by its request ID.

As a user would: `embedperf run`, then `embedperf report`, then the IDs read from report.html are
searched for in the log of the target that served the run -- a stub behind a JSON access log, and
the real reference service (`python -m service`), whose access log carries one JSON line per request.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import uvicorn

from embedperf.schema import RunFolder, read_manifest, read_requests_table
from loadgen.processes.stub_target import StubApp
from tests.conftest import uvicorn_in_thread
from tests.fakes.request_log import RequestLog, logged_ids

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]
RUN_TIMEOUT_S = 180


def run_and_report(url: str, runs_dir: Path) -> tuple[RunFolder, str]:
    """`embedperf run smoke` against url, then `embedperf report` on its folder: the folder and report.html."""
    run = subprocess.run(
        [*EMBEDPERF, "run", "smoke", "--host", url, "--runs-dir", str(runs_dir), "--no-collectors",
         "--set", "steps.duration_s=2.5", "--set", "steps.warmup_s=0.5"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    # 1: complete, over the error budget (a shared host may shed a few requests): still a full folder
    assert run.returncode in (0, 1), run.stdout[-2000:] + run.stderr[-2000:]
    folder = RunFolder(Path(run.stdout.strip().splitlines()[-1].removeprefix("run folder: ")))
    report = subprocess.run(
        [*EMBEDPERF, "report", str(folder.root)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert report.returncode == 0, report.stderr[-2000:]
    return folder, folder.report.read_text(encoding="utf-8")


def slowest_ids(html: str) -> list[str]:
    """The request IDs the report's slowest-requests table shows, in its order."""
    table = re.search(r'<table id="slowest-requests">(.*?)</table>', html, re.S)
    assert table is not None, "the report has no slowest-requests table"
    return re.findall(r'<code class="request-id">([^<]*)</code>', table.group(1))


def test_slowest_request_ids_are_found_in_a_stub_targets_access_log(tmp_path: Path) -> None:
    log = tmp_path / "access.jsonl"
    app = RequestLog(StubApp(delay_ms=1.0, served_model="stub-minilm"), log)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    with uvicorn_in_thread(config) as (host, port):
        folder, html = run_and_report(f"http://{host}:{port}", tmp_path / "runs")
    ids = slowest_ids(html)
    assert len(ids) == 10 and len(set(ids)) == 10
    logged = logged_ids(log)
    assert set(ids) <= set(logged)  # each listed request can be found in the target's log
    rows = read_requests_table(folder, ["request_id", "served_model", "t_sent_unix_s"]).to_pylist()
    sent = [r["request_id"] for r in rows if r["t_sent_unix_s"] is not None]
    assert len(set(sent)) == len(sent) and len(set(logged)) == len(logged)  # one unique ID per request
    assert set(sent) <= set(logged)  # (users stopped at the end leave a few answered requests unrecorded)
    assert {r["served_model"] for r in rows} == {"stub-minilm"}
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert all(line["answered_id"] == line["request_id"] for line in lines)  # the stub echoes it
    summary = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    assert [r["request_id"] for r in summary["slowest_requests"]] == ids  # the same list, for scripts


def test_slowest_request_ids_are_found_in_the_reference_services_log(
    reference_service: str, reference_service_log: Path, tmp_path: Path
) -> None:
    """The shared reference service, run as `python -m service` runs by default: its access log on stderr."""
    folder, html = run_and_report(reference_service, tmp_path / "runs")
    ids = slowest_ids(html)
    assert ids and "n/a" not in ids
    missing = set(ids) - set(logged_ids(reference_service_log))
    assert not missing, (
        f"slowest requests not in the service's access log {reference_service_log}: {sorted(missing)}"
    )
    rows = read_requests_table(folder, ["served_model", "ok"]).to_pylist()
    info = read_manifest(folder).service_info
    assert info is not None and info.model
    assert {r["served_model"] for r in rows if r["ok"]} == {info.model}  # each answer names its model

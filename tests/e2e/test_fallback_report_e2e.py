"""A run against the reference service with a fallback model: its report shows the fallback's share per step.

The service degrades to the main model at int8 while its workers are busy above a threshold; set low,
any load crosses it, so answers come from the fallback. The run records which model answered each
request (X-Served-Model), and the report flags the steps the fallback answered.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from embedperf.schema import read_manifest, read_requests_table
from loadgen.processes.service_proc import ServiceProcess
from tests.conftest import SERVICE_READY_TIMEOUT_S
from tests.e2e.test_request_ids_e2e import run_and_report

FALLBACK_ARGS = [
    "--fallback-precision",
    "int8",
    "--fallback-busy-threshold",
    "0.05",
    "--fallback-window-s",
    "1",
]


def test_a_run_served_partly_by_the_fallback_reports_its_share_per_step(tmp_path: Path) -> None:
    with ServiceProcess(
        FALLBACK_ARGS, log_path=tmp_path / "service.out", ready_timeout_s=SERVICE_READY_TIMEOUT_S
    ) as service:
        folder, html = run_and_report(service.url, tmp_path / "runs")
    info = read_manifest(folder).service_info
    assert info is not None and info.model and info.fallback_model and info.fallback_model != info.model
    rows = read_requests_table(folder, ["served_model", "ok"]).to_pylist()
    assert {r["served_model"] for r in rows if r["ok"]} <= {info.model, info.fallback_model}
    summary = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    shares = [s["stats"]["fallback_share"] for s in summary["steps"]]
    assert all(share is not None for share in shares) and any(share > 0 for share in shares)
    flagged = re.findall(r'<span class="mark fallback"', html)
    assert len(flagged) == sum(1 for share in shares if share > 0)  # every step the fallback answered
    assert info.fallback_model in html

"""The `make bench` path end to end: service up, ramp, service down, report written and readable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from embedperf.schema import RunFolder, read_manifest
from tests.conftest import REPO_ROOT, free_port


def test_bench_quick_profile_writes_a_complete_run_and_report(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # The quick profile with seconds-long steps: the same code path as `make bench`, shorter.
    proc = subprocess.run(
        [sys.executable, "-m", "embedperf.cli", "bench", "--profile", "quick", "--runs-dir", str(runs),
         "--port", str(free_port()), "--set", "steps.duration_s=2", "--set", "steps.warmup_s=0.5"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report_line = re.search(r"^report: (.+)$", proc.stdout, re.M)
    assert report_line, proc.stdout
    report = Path(report_line.group(1))
    folder = RunFolder(report.parent)
    manifest = read_manifest(folder)
    assert manifest.complete
    assert [s.users for s in manifest.stages] == [1, 10, 50, 100]
    assert manifest.service_info and manifest.service_info.model == "all-MiniLM-L6-v2"
    statuses = {c.name: c.status for c in manifest.collectors}
    assert statuses["psutil"] == "ok" and statuses["service"] == "ok"
    assert statuses["npu_smi"] == "skipped"
    requests = pq.read_table(folder.requests).to_pandas()
    assert len(requests) > 20 and requests["ok"].all()
    assert requests["srv_compute_ms"].notna().all()
    telemetry = pq.read_table(folder.telemetry).to_pandas()
    assert {"busy_frac", "cpu_util_pct"} <= set(telemetry["metric"])
    html = report.read_text()
    for stage in ("u1", "u10", "u50", "u100"):
        assert f">{stage}" in html
    assert "all-MiniLM-L6-v2" in html and "http://cdn" not in html
    assert (folder.analysis / "summary.json").is_file()
    # The service log stays with the run for later diagnosis.
    assert (folder.root / "service.log").is_file()

"""Live export: a real Prometheus scrapes `--metrics-port` during a Locust run; its values match the run's rows."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from embedperf.schema import RunFolder, read_requests_table
from loadgen.processes.stub_target import running_stub
from loadgen.recording.live import LATENCY_BUCKETS_MS
from tests.conftest import free_port
from tests.prometheus_server import running_prometheus

REPO_ROOT = Path(__file__).resolve().parents[3]
RUN_TIMEOUT_S = 120


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A real Prometheus scraping 127.0.0.1:<port> every second; yields (its URL, the port to serve).
    Ready before the run starts, so the first step is scraped."""
    target_port = free_port()
    jobs = {"embedperf": [f"127.0.0.1:{target_port}"]}
    with running_prometheus(tmp_path, jobs, later_jobs=("embedperf",)) as server:
        yield server.url, target_port


def query(url: str, promql: str) -> dict[str, float]:
    """An instant query -> {stage: value}."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert body["status"] == "success", body
    return {r["metric"].get("stage", ""): float(r["value"][1]) for r in body["data"]["result"]}


def test_prometheus_scrapes_live_step_figures_that_match_the_rows(tmp_path: Path, prometheus) -> None:
    prom_url, metrics_port = prometheus
    with running_stub("--delay-ms", "3") as target:
        proc = subprocess.run(
            [sys.executable, "-m", "locust", "-f", "locustfiles/ramp.py", "--headless", "--only-summary",
             "--scenario", "smoke", "--host", target, "--runs-dir", str(tmp_path / "runs"),
             "--set", "steps.duration_s=4", "--no-collectors", "--metrics-port", str(metrics_port)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert f"live metrics: http://127.0.0.1:{metrics_port}/metrics" in out, out[-3000:]
    folder = RunFolder(Path(out.split("run folder: ")[-1].splitlines()[0].strip()))
    rows = read_requests_table(folder).to_pandas()
    step0 = rows[rows.stage_index == 0]
    assert len(step0) > 10

    # step 0 ended 4 s before the run did: its last scraped figures are its final ones
    ok = query(prom_url, 'max_over_time(embedperf_requests_total{outcome="ok"}[10m])')
    assert ok["0"] == int(step0.ok.sum())
    errors = query(prom_url, 'max_over_time(embedperf_requests_total{outcome="error"}[10m])')
    assert errors["0"] == int((~step0.ok).sum())
    count = query(prom_url, "max_over_time(embedperf_latency_ms_count[10m])")
    assert count["0"] == len(step0)
    total_ms = query(prom_url, "max_over_time(embedperf_latency_ms_sum[10m])")
    assert total_ms["0"] == pytest.approx(step0.latency_ms.sum(), rel=1e-9)
    bound = LATENCY_BUCKETS_MS[2]
    le = query(prom_url, f'max_over_time(embedperf_latency_ms_bucket{{le="{bound:g}"}}[10m])')
    assert le["0"] == int((step0.latency_ms <= bound).sum())
    compute = query(prom_url, 'last_over_time(embedperf_server_stage_mean_ms{server_stage="compute"}[10m])')
    assert compute["0"] == pytest.approx(step0[step0.ok].srv_compute_ms.mean(), rel=1e-6)
    # the second step was scraped while it ran (its figures grew over time)
    step1 = query(prom_url, 'max_over_time(embedperf_requests_total{outcome="ok"}[10m])')["1"]
    assert 0 < step1 <= int(rows[rows.stage_index == 1].ok.sum())

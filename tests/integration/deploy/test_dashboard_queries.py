"""Every query of the shipped Grafana dashboard returns data from a real Prometheus while it scrapes the
reference service, an `embedperf agent` on the fake npu-smi, the live export (`--metrics-port`) of a
Locust run against that service, and an exporter publishing the npu-exporter and DCGM names the
dashboard offers as alternatives."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from tests.conftest import free_port, start_service, stop_process
from tests.integration.deploy.prometheus_stack import (
    AGENT_JOB,
    REPO_ROOT,
    SERVICE_JOB,
    Prometheus,
    dashboard_targets,
    finite,
    running_agent,
    running_prometheus,
)
from tests.prometheus_server import POLL_S, WAIT_TIMEOUT_S

MODEL = "all-MiniLM-L6-v2"
RUN_JOB = "embedperf-run"
RUN_STOP_GRACE_S = 60.0  # SIGTERM closes the run folder and stops its collectors; never SIGKILL it early
# Names and labels as npu-exporter and NVIDIA's DCGM exporter publish them (see collectors/prometheus_pull.py).
NPU_EXPORTER = {
    "npu_chip_info_utilization": 37.0,
    "npu_chip_info_hbm_used_memory": 20000.0,
    "npu_chip_info_hbm_total_memory": 65536.0,
    "npu_chip_info_hbm_bandwidth_utilization": 12.0,
    "npu_chip_info_power": 180.5,
    "npu_chip_info_temperature": 61.0,
    "npu_chip_info_health_status": 1.0,
}
DCGM = {
    "DCGM_FI_DEV_GPU_UTIL": 80.0,
    "DCGM_FI_DEV_FB_USED": 1000.0,
    "DCGM_FI_DEV_FB_FREE": 79000.0,
    "DCGM_FI_PROF_DRAM_ACTIVE": 0.25,
    "DCGM_FI_DEV_POWER_USAGE": 250.0,
    "DCGM_FI_DEV_GPU_TEMP": 55.0,
}


@contextmanager
def third_party_exporter() -> Iterator[str]:
    """npu-exporter and DCGM exporter metric names on one loopback port; yields host:port."""
    registry = CollectorRegistry()
    for name, value in NPU_EXPORTER.items():
        Gauge(name, name, ["id", "model_name", "vdie_id"], registry=registry).labels("4", "910B3", "").set(
            value
        )
    for name, value in DCGM.items():
        Gauge(name, name, ["gpu"], registry=registry).labels("0").set(value)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def start_run(tmp_path: Path, target: str, metrics_port: int) -> subprocess.Popen[bytes]:
    """A Locust run of the smoke scenario (steps long enough to be scraped) exporting on metrics_port."""
    log = open(tmp_path / "run.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", "locustfiles/ramp.py", "--headless", "--only-summary",
         "--scenario", "smoke", "--host", target, "--runs-dir", str(tmp_path / "runs"),
         "--set", "steps.duration_s=60", "--metrics-port", str(metrics_port)],
        cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def without_data(prometheus: Prometheus, exprs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (panel, expr) pairs whose instant query has no finite sample yet."""
    return [(panel, expr) for panel, expr in exprs if not finite(prometheus.query(expr))]


def test_every_panel_query_returns_data_while_a_run_is_scraped(tmp_path: Path) -> None:
    service, url = start_service(["--cache-size", "256", "--access-log", "off"], tmp_path / "service.log")
    run_port = free_port()
    try:
        # a client error, so that the errors-by-kind panel has a status other than 200 to show
        bad = httpx.post(f"{url}/v1/embeddings", json={"model": MODEL, "input": []}, timeout=30)
        assert 400 <= bad.status_code < 500, bad.text
        with (
            running_agent(tmp_path, {"FAKE_NPU_IDS": "4,5", "FAKE_NPU_BUSY_IDS": "4"}) as agent,
            third_party_exporter() as exporter,
        ):
            jobs = {
                SERVICE_JOB: [url.removeprefix("http://")],
                AGENT_JOB: [agent],
                "exporters": [exporter],
                RUN_JOB: [f"127.0.0.1:{run_port}"],  # down until the run serves it
            }
            with running_prometheus(tmp_path, jobs, later_jobs=(RUN_JOB,)) as prometheus:
                targets = dashboard_targets()
                assert len(targets) >= 20
                run = start_run(tmp_path, url, run_port)
                try:
                    deadline = time.monotonic() + WAIT_TIMEOUT_S
                    while missing := without_data(prometheus, targets):
                        assert run.poll() is None, (tmp_path / "run.log").read_text(errors="replace")[-3000:]
                        assert time.monotonic() < deadline, f"dashboard queries without data: {missing}"
                        time.sleep(POLL_S)
                finally:
                    stop_process(run, grace_s=RUN_STOP_GRACE_S)
    finally:
        stop_process(service)

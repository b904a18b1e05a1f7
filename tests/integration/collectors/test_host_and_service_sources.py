"""Host source on real processes; service source against a /metrics endpoint that dies and comes back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIServer

import httpx
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

sys.path.insert(0, str(Path(__file__).parent))
from collector_run import (  # noqa: E402
    WAIT_TIMEOUT_S,
    collector_log,
    event_kinds,
    read_outputs,
    start_collector,
    stop_collector,
    wait_until,
    written_so_far,
)

from tests.conftest import free_port  # noqa: E402

RATE_QPS = 20.0


class FakeService:
    """A prometheus_client endpoint with the reference service's names, fed at RATE_QPS."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.server: WSGIServer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        registry = CollectorRegistry()
        requests = Counter("embedperf_requests_total", "r", ["status"], registry=registry)
        compute = Counter("embedperf_compute_seconds_total", "c", registry=registry)
        queue = Gauge("embedperf_queue_depth", "q", registry=registry)
        batch = Histogram("embedperf_batch_size", "b", buckets=(1, 4, 16), registry=registry)
        self.server, _ = start_http_server(self.port, addr="127.0.0.1", registry=registry)
        self._stop.clear()

        queue.set(3)

        def feed() -> None:
            # increments follow elapsed time, so the true rate holds however the thread is scheduled
            last = time.monotonic()
            while not self._stop.wait(0.05):
                now = time.monotonic()
                dt, last = now - last, now
                requests.labels(status="200").inc(RATE_QPS * dt)
                compute.inc(0.5 * dt)  # busy half the time
                batch.observe(4)

        self._thread = threading.Thread(target=feed, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self._thread is not None:
            self._thread.join(2)


def sampled(frame: pd.DataFrame, source: str, after_unix_s: float = 0.0) -> int:
    """Distinct tick times a source has written after an instant."""
    return int(frame[(frame.source == source) & (frame.ts_unix_s > after_unix_s)].ts_unix_s.nunique())


def rated(frame: pd.DataFrame, after_unix_s: float = 0.0) -> int:
    """Request rates the service source has derived (each from two scrapes) after an instant."""
    rates = frame[(frame.metric == "request_rate_qps") & (frame.ts_unix_s > after_unix_s)]
    return int(rates.ts_unix_s.nunique())


@pytest.fixture
def busy_generator() -> Iterator[int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nend=time.time()+60\nwhile time.time()<end: pass"]
    )
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(5)


def test_host_and_service_sources_with_a_metrics_gap(tmp_path: Path, busy_generator: int) -> None:
    port = free_port()
    service = FakeService(port)
    service.start()
    out = tmp_path / "run"
    proc = start_collector(
        out,
        "--sources",
        "psutil,service",
        "--service-url",
        f"http://127.0.0.1:{port}",
        "--generator-pid",
        str(busy_generator),
    )
    try:
        wait_until(proc, out, lambda f: rated(f) >= 4, "four request rates from the service")
        service.stop()  # the target stops answering
        stopped = time.time()

        def gap_seen(frame: pd.DataFrame) -> bool:  # the host was sampled twice while the service was away
            return sampled(frame, "psutil", stopped) >= 2

        wait_until(proc, out, gap_seen, "host samples while the service was down")
        service.start()  # and comes back with its counters reset
        back = time.time()
        wait_until(proc, out, lambda f: rated(f, back) >= 2, "two request rates after the service came back")
    finally:
        rc = stop_collector(proc)
        service.stop()
    assert rc == 0
    frame, status = read_outputs(out)
    svc = frame[frame.source == "service"]
    qps = svc[svc.metric == "request_rate_qps"].value
    assert len(qps) >= 4
    assert qps.median() == pytest.approx(RATE_QPS, rel=0.2)
    assert (qps >= 0).all(), "a counter reset must not give a negative rate"
    busy = svc[svc.metric == "busy_frac"].value
    assert busy.median() == pytest.approx(0.5, rel=0.2)
    assert set(svc[svc.metric == "batch_size_mean"].value) == {4.0}
    assert set(svc[svc.metric == "queue_depth"].value) == {3.0}
    kinds = event_kinds(status["service"], "service")
    assert kinds.index("gap") < kinds.index("recovered")
    assert status["service"]["status"] == "partial"

    host = frame[frame.source == "psutil"]
    assert {"cpu_util_pct", "mem_used_mb", "mem_total_mb"} <= set(host[host.device == "cpu"].metric)
    gen_cpu = host[(host.device == "proc:generator") & (host.metric == "cpu_util_pct")].value
    assert gen_cpu.median() > 30.0, "a busy loop shows up as CPU on proc:generator"
    # the service PID was found by the port it listens on: this test process serves the endpoint
    rss = host[(host.device == "proc:service") & (host.metric == "rss_mb")].value
    assert len(rss) > 0 and rss.min() > 10.0
    assert any(str(os.getpid()) in e["message"] for e in status["psutil"]["events"])


def test_real_reference_service(tmp_path: Path, reference_service: str) -> None:
    out = tmp_path / "run"
    proc = start_collector(out, "--sources", "service,psutil", "--service-url", reference_service)

    def busy_rates_seen(frame: pd.DataFrame) -> bool:  # what the assertions below read, seen under load
        svc = frame[frame.source == "service"]
        busy = {
            m
            for m in ("request_rate_qps", "busy_frac", "tokens_per_s")
            if (svc[svc.metric == m].value > 0).any()
        }
        return len(busy) == 3 and sampled(frame, "psutil") >= 1

    sent = 0
    try:
        with httpx.Client(timeout=30) as client:
            deadline = time.monotonic() + WAIT_TIMEOUT_S
            while not busy_rates_seen(written_so_far(out)):  # the load goes on until the collector saw it
                assert time.monotonic() < deadline and proc.poll() is None, collector_log(out)
                for _ in range(5):
                    r = client.post(
                        f"{reference_service}/v1/embeddings",
                        json={"input": ["hello world"] * 4, "model": "all-MiniLM-L6-v2"},
                    )
                    assert r.status_code == 200, r.text
                    sent += 1
    finally:
        rc = stop_collector(proc)
    assert rc == 0 and sent > 0
    frame, status = read_outputs(out)
    svc = frame[frame.source == "service"]
    assert svc[svc.metric == "request_rate_qps"].value.max() > 0
    assert svc[svc.metric == "busy_frac"].value.max() > 0
    assert svc[svc.metric == "tokens_per_s"].value.max() > 0
    assert svc[svc.metric == "batch_size_mean"].value.min() >= 1
    service_rows = frame[(frame.device == "proc:service") & (frame.metric == "rss_mb")]
    assert service_rows.value.min() > 50.0, "the model-serving process holds the model in memory"
    assert status["service"]["status"] == "ok", status["service"]

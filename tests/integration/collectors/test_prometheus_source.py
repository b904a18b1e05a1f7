"""The prometheus source against a REAL Prometheus server scraping a local npu-exporter/DCGM-named exporter."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

sys.path.insert(0, str(Path(__file__).parent))
from collector_run import read_outputs, start_collector, stop_collector, wait_until  # noqa: E402

from tests.conftest import free_port  # noqa: E402
from tests.prometheus_server import running_prometheus  # noqa: E402


def start_exporter() -> tuple[int, object]:
    registry = CollectorRegistry()
    labels = ["id", "model_name", "vdie_id"]
    for name, value in (
        ("npu_chip_info_utilization", 37.0),
        ("npu_chip_info_overall_utilization", 55.0),
        ("npu_chip_info_hbm_used_memory", 20000.0),
        ("npu_chip_info_hbm_total_memory", 65536.0),
        ("npu_chip_info_power", 180.5),
    ):
        Gauge(name, name, labels, registry=registry).labels(id="4", model_name="910B3", vdie_id="").set(value)
    Gauge("npu_chip_info_temperature", "t", labels, registry=registry).labels(
        id="5", model_name="910B3", vdie_id="1"
    ).set(61.0)
    dcgm = {
        "DCGM_FI_DEV_GPU_UTIL": 80.0,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.25,
        "DCGM_FI_DEV_FB_USED": 1000.0,
        "DCGM_FI_DEV_FB_FREE": 79000.0,
    }
    for name, value in dcgm.items():
        Gauge(name, name, ["gpu"], registry=registry).labels(gpu="0").set(value)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    return port, server


@pytest.fixture
def prometheus_url(tmp_path: Path) -> Iterator[str]:
    """A real Prometheus that has scraped the exporter at least once."""
    exporter_port, server = start_exporter()
    try:
        with running_prometheus(tmp_path, {"npu": [f"127.0.0.1:{exporter_port}"]}) as prometheus:
            yield prometheus.url
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]


def test_pulls_the_run_window_and_maps_exporter_names(tmp_path: Path, prometheus_url: str) -> None:
    out = tmp_path / "run"
    proc = start_collector(
        out, "--sources", "prometheus,psutil", "--prometheus-url", prometheus_url, "--host-label", "node7"
    )
    started = time.time()
    # the host samples show the collector running (Prometheus is pulled at the stop, for its whole window)
    wait_until(proc, out, lambda f: f[f.source == "psutil"].ts_unix_s.nunique() >= 4, "4 s of host samples")
    assert stop_collector(proc) == 0
    stopped = time.time()
    frame, status = read_outputs(out)
    assert status["prometheus"]["status"] == "ok", status["prometheus"]
    frame = frame[frame.source == "prometheus"]
    got = {(d, m): v for d, m, v in zip(frame.device, frame.metric, frame.value, strict=True)}
    assert got[("npu4.chip0", "aicore_util_pct")] == 37.0
    assert got[("npu4.chip0", "device_util_pct")] == 55.0
    assert got[("npu4.chip0", "mem_used_mb")] == 20000.0
    assert got[("npu4.chip0", "mem_total_mb")] == 65536.0
    assert got[("npu4.chip0", "power_w")] == 180.5
    assert got[("npu5.chip1", "temp_c")] == 61.0
    assert got[("gpu0", "device_util_pct")] == 80.0
    assert got[("gpu0", "mem_bw_util_pct")] == 25.0
    assert got[("gpu0", "mem_total_mb")] == 80000.0
    assert set(frame.host) == {"node7"} and set(frame.source) == {"prometheus"}
    # the collector's own window, one point per step (= interval)
    ts = sorted(set(frame[frame.metric == "power_w"].ts_unix_s))
    assert started - 3 <= ts[0] and ts[-1] <= stopped + 1
    assert len(ts) >= 3 and all(abs(b - a - 1.0) < 1e-6 for a, b in zip(ts, ts[1:], strict=False))

    # an explicit window (--prometheus-start/--prometheus-end) is pulled as given
    window_start = float(math.ceil(started))  # data exists from before `started`, not before its floor
    out2 = tmp_path / "run2"
    args = ["--sources", "prometheus", "--prometheus-url", prometheus_url, "--duration", "0.5"]
    args += ["--prometheus-start", str(window_start), "--prometheus-end", str(window_start + 2)]
    proc = start_collector(out2, *args)
    assert proc.wait(30) == 0
    frame2, _ = read_outputs(out2)
    assert sorted(set(frame2.ts_unix_s)) == [window_start, window_start + 1, window_start + 2]


def test_unreachable_server_fails_with_reason_and_others_continue(tmp_path: Path) -> None:
    out = tmp_path / "run"
    dead = f"http://127.0.0.1:{free_port()}"
    proc = start_collector(out, "--sources", "prometheus,psutil", "--prometheus-url", dead)
    wait_until(proc, out, lambda f: bool((f.source == "psutil").any()), "a host sample")
    assert stop_collector(proc) == 0
    _, status = read_outputs(out)
    assert status["prometheus"]["status"] == "failed"
    assert "--prometheus-url" in status["prometheus"]["reason"]
    assert status["psutil"]["status"] == "ok"

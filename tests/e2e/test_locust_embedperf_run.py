"""End to end: `embedperf run` and `embedperf bench` as users type them, against a stub and the real service."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from embedperf.schema import read_manifest, read_requests_table
from loadgen.cli.runner import run_scenario

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]


def test_embedperf_run_reports_scenario_typos_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*EMBEDPERF, "run", "smoke", "--runs-dir", str(tmp_path), "--set", "steps.duraton_s=1"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "did you mean 'duration_s'" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_fails_clearly_when_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        proc = subprocess.run(
            [*EMBEDPERF, "bench", "--port", str(port), "--runs-dir", str(tmp_path)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 2
    assert f"port {port}" in proc.stderr and "already in use" in proc.stderr and "PORT=" in proc.stderr


def test_smoke_against_reference_service(reference_service: str, tmp_path: Path) -> None:
    folder = run_scenario(
        "smoke",
        host=reference_service,
        runs_dir=tmp_path,
        overrides={"steps.duration_s": "2", "payload.validation_mix": "0.2"},
        collectors=False,
        timeout_s=120,
    )
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.service_info and manifest.service_info.dimension == 384
    rows = read_requests_table(folder).to_pylist()
    normal = [r for r in rows if r["endpoint"] == "/v1/embeddings"]
    assert normal and all(r["ok"] for r in normal), {r["error"] for r in normal}
    assert all(r["srv_compute_ms"] is not None and r["batch_size"] >= 1 for r in normal)
    empty = [r for r in rows if r["endpoint"] == "validation:empty_must_fail"]
    assert all(r["ok"] and 400 <= r["status_code"] < 500 for r in empty)

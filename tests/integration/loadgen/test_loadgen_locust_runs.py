"""Real Locust runs against stub servers: run folder contents, validation, open loop, interruption."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from embedperf.error_kinds import error_kind
from embedperf.parts import PART_SUFFIX
from embedperf.schema import REQUEST_SCHEMA, RunFolder, read_manifest, read_requests_table
from loadgen.processes.stub_target import running_stub

REPO_ROOT = Path(__file__).resolve().parents[3]
StubServer = Callable[..., str]
STUB_DELAY_MS = 20  # ~50 answers/s per user: hundreds of rows in a 2 s step, no core spent on load


@pytest.fixture
def stub_server() -> Iterator[StubServer]:
    """Start stub embedding servers with the given flags; each call returns a base URL."""
    with ExitStack() as stack:
        yield lambda *flags: stack.enter_context(running_stub(*flags))


def locust_cmd(locustfile: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "locustfiles" / locustfile), *args]


def run_locust(
    locustfile: str, *args: str, timeout_s: float = 90, cwd: Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        locust_cmd(locustfile, *args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def folder_from_output(stdout: str) -> Path:
    lines = [line for line in stdout.splitlines() if line.startswith("run folder: ")]
    assert lines, f"no 'run folder:' line in output:\n{stdout[-3000:]}"
    return Path(lines[-1].removeprefix("run folder: ").strip())


def _locust_request_count(folder: RunFolder) -> int:
    with open(folder.locust / "locust_stats.csv", encoding="utf-8") as fh:
        rows = {r["Name"]: r for r in csv.DictReader(fh)}
    return int(rows["Aggregated"]["Request Count"])


def test_smoke_ramp_writes_complete_run_folder(stub_server: StubServer, tmp_path: Path) -> None:
    """Started outside the repository with a relative --runs-dir, as a user in their own directory does:
    every file of the run, the collectors' included, lands in the one run folder under that directory."""
    url = stub_server("--delay-ms", str(STUB_DELAY_MS))
    proc = run_locust(
        "ramp.py", "--headless", "--scenario", "smoke", "--host", url, "--runs-dir", "runs",
        "--step-duration-s", "2", "--warmup-s", "0.5", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = RunFolder(folder_from_output(proc.stdout))
    assert folder.root.parent == tmp_path / "runs"
    assert folder.telemetry.is_file() and folder.collectors_status.is_file()
    assert not (REPO_ROOT / "runs" / folder.root.name).exists()
    assert folder.requests.is_file() and not folder.requests_parts.exists()
    table = read_requests_table(folder)
    assert table.schema.equals(REQUEST_SCHEMA)
    assert table.num_rows == _locust_request_count(folder) > 50
    rows = table.to_pylist()
    assert {r["stage_label"] for r in rows} == {"u1", "u4"}
    assert {(r["stage_index"], r["target_users"]) for r in rows} == {(0, 1), (1, 4)}
    assert all(r["ok"] and r["status_code"] == 200 for r in rows)
    assert all(r["t_done_unix_s"] > r["t_sent_unix_s"] == r["t_intended_unix_s"] for r in rows)
    assert all(
        r["latency_ms"] >= STUB_DELAY_MS and r["srv_total_ms"] is not None and r["batch_size"] == r["n_inputs"]
        for r in rows
    )
    assert {r["n_inputs"] for r in rows} == {1, 4}
    assert {r["worker"] for r in rows} == {"local"}
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.kind == "closed_loop"
    assert [s.label for s in manifest.stages] == ["u1", "u4"]
    assert all(s.end_unix_s is not None and s.warmup_s == 0.5 for s in manifest.stages)
    info = manifest.service_info
    assert info is not None and (info.model, info.dimension, info.device) == ("stub", 8, "cpu")
    assert manifest.scenario.steps[0].duration_s == 2.0  # the resolved scenario
    assert (manifest.slo.p99_ms, manifest.slo.error_budget_pct) == (300.0, 0.1)
    assert manifest.collectors, "collector statuses (or why there are none) are recorded"
    assert manifest.generator_cpu.mean_pct is not None
    assert manifest.git.get("commit") and manifest.host.cpu_cores_logical
    assert (folder.locust / "report.html").is_file()


def test_validation_mix_and_wrong_dimension(stub_server: StubServer, tmp_path: Path) -> None:
    url = stub_server("--no-info", "--dim", "8")
    proc = run_locust(
        "ramp.py", "--headless", "--scenario", "smoke", "--host", url, "--runs-dir", str(tmp_path),
        "--set", "steps=[{users: 2, duration_s: 2}]", "--set", "payload.validation_mix=0.5",
        "--set", "target.dimension=16", "--no-collectors",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # every answer had the wrong dimension
    folder = RunFolder(folder_from_output(proc.stdout))
    rows = read_requests_table(folder).to_pylist()
    empty = [r for r in rows if r["endpoint"] == "validation:empty_must_fail"]
    assert empty and all(r["ok"] and r["status_code"] == 400 for r in empty)
    normal = [r for r in rows if r["endpoint"] == "/v1/embeddings"]
    assert normal and all(not r["ok"] and "wrong dimension: 8, expected 16" in r["error"] for r in normal)
    long_ok = [r for r in rows if r["endpoint"] == "validation:long_5000"]
    assert long_ok and all(r["input_chars"] == 5000 for r in long_ok)


@pytest.mark.solo
def test_open_loop_schedule_against_delay_server_with_stall(stub_server: StubServer, tmp_path: Path) -> None:
    url = stub_server("--delay-ms", "20")
    stall_at: dict[str, float] = {}
    started = threading.Event()

    def stall() -> None:
        """Once 120 requests (3 s of the load) have arrived, the service pauses for 1 s."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not started.wait(0.05):
            if httpx.get(f"{url}/_count", timeout=5).json()["requests"] >= 120:
                stall_at["before"] = time.time()
                httpx.post(f"{url}/_stall?ms=1000", timeout=5)
                stall_at["after"] = time.time()  # the stall began between these two instants
                started.set()

    stall_thread = threading.Thread(target=stall, daemon=True)
    stall_thread.start()
    proc = run_locust(
        "openloop.py", "--headless", "--host", url, "--runs-dir", str(tmp_path), "--no-collectors",
        "--set", "steps=[{rate: 40, duration_s: 4}, {rate: 40, duration_s: 3}]",
        "--set", "open_loop.arrival=constant", "--set", "drain_s=1.5",
    )  # fmt: skip
    started.set()  # stops the poller if the load never reached 120 requests
    stall_thread.join(timeout=10)
    assert proc.returncode == 0, proc.stderr[-3000:]  # late answers are answers: within the error budget
    assert "before" in stall_at and "after" in stall_at, "the stall was never injected"
    folder = RunFolder(folder_from_output(proc.stdout))
    rows = read_requests_table(folder).to_pylist()
    assert 270 <= len(rows) <= 282  # 40/s x 7 s
    assert all(r["ok"] for r in rows), {r["error"] for r in rows}
    assert {r["target_rate"] for r in rows} == {40.0}
    intended = sorted(r["t_intended_unix_s"] for r in rows)
    gaps = [b - a for a, b in zip(intended, intended[1:], strict=False)]
    assert max(gaps) == pytest.approx(0.025, abs=0.002)  # scheduled, not response-driven
    t_stall, t_stall_known = stall_at["before"], stall_at["after"]
    calm = [r for r in rows if r["t_intended_unix_s"] < t_stall - 0.5]
    lags_ms = sorted((r["t_sent_unix_s"] - r["t_intended_unix_s"]) * 1000 for r in calm)
    assert lags_ms[len(lags_ms) // 2] < 15
    latencies = sorted(r["latency_ms"] for r in calm)
    assert 19 <= latencies[len(latencies) // 2] < 60
    in_stall = [r for r in rows if t_stall_known <= r["t_intended_unix_s"] <= t_stall + 0.9]
    assert len(in_stall) >= 25
    for r in in_stall:  # every request scheduled during the stall shows it
        assert r["latency_from_intended_ms"] >= (t_stall + 1.0 - r["t_intended_unix_s"]) * 1000 - 60
    manifest = read_manifest(folder)
    assert manifest.kind == "open_loop" and manifest.open_loop["dropped"] == 0  # type: ignore[attr-defined]


def test_open_loop_in_flight_cap_records_dropped_rows(stub_server: StubServer, tmp_path: Path) -> None:
    url = stub_server("--delay-ms", "300")
    proc = run_locust(
        "openloop.py", "--headless", "--host", url, "--runs-dir", str(tmp_path), "--no-collectors",
        "--set", "steps=[{rate: 50, duration_s: 2}]", "--set", "open_loop.max_in_flight=5",
        "--set", "open_loop.arrival=constant",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # dropped arrivals are failures, over the budget
    rows = read_requests_table(RunFolder(folder_from_output(proc.stdout))).to_pylist()
    dropped = [r for r in rows if r["error"] == "dropped: in-flight cap"]
    assert len(rows) == 100 and len(dropped) > 50
    assert all(not r["ok"] and r["t_sent_unix_s"] is None and r["t_intended_unix_s"] for r in dropped)


def test_sigterm_leaves_a_readable_folder(stub_server: StubServer, tmp_path: Path) -> None:
    url = stub_server("--delay-ms", "5")
    proc = subprocess.Popen(
        locust_cmd(
            "ramp.py", "--headless", "--scenario", "smoke", "--host", url, "--runs-dir", str(tmp_path),
            "--step-duration-s", "60", "--no-collectors",
        ),
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    parts: list[Path] = []
    while time.monotonic() < deadline and not any(p.stat().st_size > 1000 for p in parts):
        time.sleep(0.5)
        parts = list(tmp_path.glob(f"*/requests.parts/*{PART_SUFFIX}"))  # rows flushed: the load is on
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    folder = RunFolder(next(tmp_path.iterdir()))
    table = read_requests_table(folder)
    assert isinstance(table, pa.Table) and table.num_rows > 10
    manifest = read_manifest(folder)
    assert (not manifest.complete) or manifest.interrupted  # type: ignore[attr-defined]
    assert "run folder: " in out


def test_locust_statistics_count_every_failure_the_rows_record(
    stub_server: StubServer, tmp_path: Path
) -> None:
    """Each request is reported to Locust once, as a failure exactly when its row says so, with its reason."""
    url = stub_server("--delay-ms", str(STUB_DELAY_MS), "--fail-every", "4")
    proc = run_locust(
        "ramp.py", "--headless", "--scenario", "smoke", "--host", url, "--runs-dir", str(tmp_path),
        "--step-duration-s", "2", "--warmup-s", "0.5", "--set", "slo.error_budget_pct=50",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = RunFolder(folder_from_output(proc.stdout))
    rows = read_requests_table(folder).to_pylist()
    failed = [r for r in rows if not r["ok"]]
    assert {(r["status_code"], r["error"]) for r in failed} == {(503, "HTTP 503")}
    assert len(rows) > 40 and abs(len(failed) / len(rows) - 0.25) < 0.05
    with open(folder.locust / "locust_stats.csv", encoding="utf-8") as fh:
        aggregated = {r["Name"]: r for r in csv.DictReader(fh)}["Aggregated"]
    assert int(aggregated["Request Count"]) == len(rows)
    assert int(aggregated["Failure Count"]) == len(failed)
    with open(folder.locust / "locust_failures.csv", encoding="utf-8") as fh:
        reasons = {r["Error"]: int(r["Occurrences"]) for r in csv.DictReader(fh)}
    assert reasons == {"RequestFailed('HTTP 503')": len(failed)}


@pytest.mark.parametrize("stop_timeout", [None, "1"])
def test_the_last_step_counts_the_requests_in_flight_when_the_run_stops(
    stub_server: StubServer, tmp_path: Path, stop_timeout: str | None
) -> None:
    """6 s answers in a 2 s step: every user's request is still in flight when the step ends; it belongs
    to the step it started in, and the run waits for it (up to the request timeout). A shorter
    --stop-timeout cuts it off: its row says so, it is never dropped silently."""
    url = stub_server("--delay-ms", "6000")
    proc = run_locust(
        "ramp.py", "--headless", "--scenario", "smoke", "--host", url, "--runs-dir", str(tmp_path),
        "--set", "steps=[{users: 2, duration_s: 2}]", "--no-collectors",
        *(["--stop-timeout", stop_timeout] if stop_timeout else []),
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: smoke's P99 SLO, not what is checked here
    folder = RunFolder(folder_from_output(proc.stdout))
    (stage,) = read_manifest(folder).stages
    assert stage.end_unix_s is not None
    rows = read_requests_table(folder).to_pylist()
    assert len(rows) == 2 and all(r["stage_index"] == 0 and r["request_id"] for r in rows), rows
    assert all(r["t_sent_unix_s"] < stage.end_unix_s for r in rows)
    if stop_timeout is None:
        assert all(r["ok"] and r["t_done_unix_s"] > stage.end_unix_s for r in rows)
    else:
        assert all(not r["ok"] and error_kind(None, r["error"]) == "cut_off" for r in rows), rows

"""`embedperf run` / `locust --headless` exit codes as a user meets them: each mistake one line and its code.

0 ok; 1 complete but over the error budget; 2 usage or pre-flight error (nothing measured); 3 incomplete.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest

from analysis.run.analyse import analyse_folder
from embedperf.schema import RunFolder, read_manifest, read_requests_table
from loadgen.processes.service_proc import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]
SHORT = ["--set", "steps.duration_s=3", "--set", "steps.warmup_s=0.5", "--no-collectors"]
STUB_DELAY_MS = 20  # ~50 answers/s per user: what these checks need, no core spent on load


def embedperf(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EMBEDPERF, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s
    )


def folder_of(stdout: str) -> RunFolder:
    lines = [line for line in stdout.splitlines() if line.startswith("run folder: ")]
    assert lines, stdout[-2000:]
    return RunFolder(Path(lines[-1].removeprefix("run folder: ").strip()))


class Stub:
    """The stub server as a process this test can kill mid-run."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen.processes.stub_target", "--port", str(self.port),
             "--delay-ms", str(STUB_DELAY_MS)],
            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(200):
            if self.count() is not None:
                return
            time.sleep(0.1)
        raise AssertionError("stub server did not start")

    def count(self) -> int | None:
        try:
            with urllib.request.urlopen(f"{self.url}/_count", timeout=2) as resp:  # noqa: S310 - loopback
                return int(json.loads(resp.read())["requests"])
        except OSError:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    yield server
    server.kill()


class HealthyRun(NamedTuple):
    folder: RunFolder
    stub_url: str  # the target's plain base URL, http://127.0.0.1:PORT
    stdout: str


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> HealthyRun:
    """A healthy smoke run given the host as users often type it: trailing slash and a /v1 base URL;
    labelled, as `embedperf run --label` names its folder."""
    server = Stub()
    try:
        runs = tmp_path_factory.mktemp("healthy")
        proc = embedperf(
            "run", "smoke", "--host", f"{server.url}/v1/", "--runs-dir", str(runs), "--label", "e2e", *SHORT
        )
    finally:
        server.kill()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return HealthyRun(folder_of(proc.stdout), server.url, proc.stdout)


def test_embedperf_run_smoke_prints_folder(healthy: HealthyRun) -> None:
    last = healthy.stdout.strip().splitlines()[-1]
    assert last == f"run folder: {healthy.folder.root}"  # the last line, where scripts look for it
    assert healthy.folder.run_id.endswith("-smoke-e2e")
    manifest = read_manifest(healthy.folder)
    assert manifest.complete and manifest.label == "e2e"


def test_trailing_slash_and_v1_base_url_are_normalised(healthy: HealthyRun) -> None:
    manifest = read_manifest(healthy.folder)
    assert manifest.complete
    assert manifest.target_url == f"{healthy.stub_url}/v1/embeddings"  # not //v1, /v1/v1 or a dropped /v1
    assert manifest.target.base_url == healthy.stub_url
    rows = read_requests_table(healthy.folder).to_pylist()
    assert len(rows) > 20 and all(r["ok"] and r["status_code"] == 200 for r in rows)


class _Refuse(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(401)
        self.end_headers()
        self.wfile.write(b'{"error": "invalid api key"}')

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def refusing_target() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()  # quick shutdown()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("mistake", "says"),
    [
        ("missing_scheme", "has no scheme; use http://127.0.0.1:"),
        ("dead_port", "cannot reach the target at http://127.0.0.1:"),
        ("wrong_path", "404 Not Found: wrong path"),
        ("wrong_key", "the target needs an API key (HTTP 401"),
        ("misspelt_corpus", "unknown corpus 'en_shrt' (did you mean 'en_short'?)"),
    ],
)
def test_each_mistake_is_one_line_and_exit_2_with_nothing_measured(
    mistake: str, says: str, stub: Stub, refusing_target: str, tmp_path: Path
) -> None:
    host = {
        "missing_scheme": stub.url.removeprefix("http://"),
        "dead_port": f"http://127.0.0.1:{free_port()}",
        "wrong_path": f"{stub.url}/api",
        "wrong_key": refusing_target,
        "misspelt_corpus": stub.url,
    }[mistake]
    extra = ["--set", "payload.corpora=[en_shrt]"] if mistake == "misspelt_corpus" else []
    proc = embedperf("run", "smoke", "--host", host, "--runs-dir", str(tmp_path / "runs"), *SHORT, *extra)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not list((tmp_path / "runs").glob("*")), "nothing may be measured"
    assert stub.count() == 0 or mistake == "wrong_path"  # the stub got no load (the 404 probe aside)


def test_locust_headless_checks_the_target_before_any_load(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "locustfiles" / "ramp.py"), "--headless",
         "--scenario", "smoke", "--host", f"http://127.0.0.1:{free_port()}", "--runs-dir", str(tmp_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "embedperf: error: cannot reach the target" in proc.stderr
    assert not list(tmp_path.glob("*"))


def test_dead_target_mid_run_exits_1_backs_off_and_fails_the_gate(
    healthy: HealthyRun, stub: Stub, tmp_path: Path
) -> None:
    run = subprocess.Popen(
        [*EMBEDPERF, "run", "smoke", "--host", stub.url, "--runs-dir", str(tmp_path), "--label", "dead", *SHORT],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    while (stub.count() or 0) < 20 and run.poll() is None:  # the load has started: now the service dies
        time.sleep(0.05)
    stub.kill()
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1, err[-3000:]
    reason = [line for line in err.splitlines() if "exceeds the scenario's error budget" in line]
    assert len(reason) == 1 and "Connection refused" in reason[0]
    folder = folder_of(out)
    manifest = read_manifest(folder)
    assert manifest.complete  # the run is complete; its error budget failed
    backoffs = manifest.connection_backoffs  # type: ignore[attr-defined]
    rows = read_requests_table(folder).to_pylist()
    no_answer = [r for r in rows if r["status_code"] is None and not r["ok"]]  # one back-off each
    assert any("refused" in r["error"].lower() for r in no_answer)
    assert sum(backoffs.values()) == len(no_answer)
    # 4 users backing off from 50 ms to 2 s send a handful of requests per second, not thousands
    assert len(no_answer) < 4 * 6 * 3 * 2
    summary = analyse_folder(folder, n_boot=50).summary
    last = summary.steps[-1].stats
    assert last.goodput_qps == last.qps == 0.0 < last.offered_qps  # failures are not throughput
    assert not summary.steps[-1].meets_slo and summary.capacity.knee_index != last.index
    [outage] = summary.outage_windows
    assert outage.end_unix_s >= last.steady_end_unix_s - 2.0  # the target stayed down to the end
    gate = embedperf(
        "compare", str(healthy.folder.root), str(folder.root), "--gate", "qps:-3%,p99_ms:+50%",
        "--out", str(tmp_path / "compare.html"),
    )  # fmt: skip
    assert gate.returncode == 1, gate.stdout[-2000:] + gate.stderr[-2000:]
    assert "gate failed" in gate.stderr


def test_sigkill_of_locust_leaves_a_reported_folder_and_no_collectors(stub: Stub, tmp_path: Path) -> None:
    run = subprocess.Popen(
        [*EMBEDPERF, "run", "smoke", "--host", stub.url, "--runs-dir", str(tmp_path),
         "--set", "steps.duration_s=60"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    runner = psutil.Process(run.pid)
    locust = collectors = None
    while collectors is None and run.poll() is None:
        time.sleep(0.1)
        for child in runner.children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
            except psutil.NoSuchProcess:  # a short-lived child (git, for the provenance) already ended
                continue
            if "locust" in cmd and "collectors_proc" not in cmd:
                locust = child
            elif "loadgen.processes.collectors_proc" in cmd:
                collectors = child
    assert locust is not None and collectors is not None
    while (stub.count() or 0) < 20:
        time.sleep(0.05)
    locust.send_signal(signal.SIGKILL)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, err[-3000:]
    folder = folder_of(out)
    assert folder.root.parent == tmp_path
    assert not read_manifest(folder).complete
    collectors.wait(timeout=60)  # dies with its parent: returns once it has exited
    assert not collectors.is_running()
    report = embedperf("report", str(folder.root))
    assert report.returncode == 0, report.stderr[-3000:]  # the report was written; the run itself said 3
    html = (folder.root / "report.html").read_text(encoding="utf-8")
    assert "incomplete" in html


def test_run_stopped_by_its_timeout_is_incomplete_exit_3(stub: Stub, tmp_path: Path) -> None:
    proc = embedperf(
        "run", "smoke", "--host", stub.url, "--runs-dir", str(tmp_path), "--no-collectors",
        "--set", "steps.duration_s=60", "--timeout-s", "5",
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "run incomplete: stopped before the scenario's last stage ended" in proc.stderr
    manifest = read_manifest(folder_of(proc.stdout))
    assert manifest.interrupted  # type: ignore[attr-defined]


def test_sigterm_to_embedperf_run_stops_locust_gracefully_and_leaves_no_process(
    stub: Stub, tmp_path: Path
) -> None:
    run = subprocess.Popen(
        [*EMBEDPERF, "run", "smoke", "--host", stub.url, "--runs-dir", str(tmp_path),
         "--set", "steps.duration_s=60"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    runner = psutil.Process(run.pid)
    children: list[psutil.Process] = []
    while len(children) < 2 and run.poll() is None:  # locust and its collectors child
        time.sleep(0.1)
        children = runner.children(recursive=True)
    while (stub.count() or 0) < 20:
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, err[-3000:]
    manifest = read_manifest(folder_of(out))
    assert manifest.complete and manifest.interrupted  # type: ignore[attr-defined]
    gone, alive = psutil.wait_procs(children, timeout=60)
    assert not alive and len(gone) >= 2

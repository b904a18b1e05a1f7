"""A target that stops answering some requests: the client gives up at target.timeout_s, and the run, its rows
and its analysis call those requests `timeout` (not a refused or reset connection, not an HTTP error)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import uvicorn

from analysis.run.analyse import analyse_folder
from embedperf.error_kinds import error_kind
from embedperf.schema import RunFolder, read_requests_table
from loadgen.processes.stub_target import StubApp
from tests.conftest import REPO_ROOT, uvicorn_in_thread

TIMEOUT_S = 0.5  # the scenario's target.timeout_s
HOLD_EVERY = 4  # every 4th embeddings request (after the pre-flight check) is never answered in time
RUN_TIMEOUT_S = 180  # a guard against a hang, not a performance bound

Scope = dict[str, Any]


class Unanswered:
    """The stub, except that every HOLD_EVERY-th embeddings request is held until the test releases it."""

    def __init__(self) -> None:
        self.stub = StubApp(delay_ms=2.0)
        self.released = threading.Event()
        self.seen = 0
        self.held = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/embeddings":
            self.seen += 1
            if self.seen > 1 and self.seen % HOLD_EVERY == 0:
                self.held += 1
                while not self.released.is_set():  # far longer than the client waits
                    await asyncio.sleep(0.05)
        await self.stub(scope, receive, send)


def test_a_request_the_target_never_answers_is_a_timeout(tmp_path: Path) -> None:
    app = Unanswered()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    with uvicorn_in_thread(config) as (host, port):
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "embedperf.cli", "run", "smoke", "--host", f"http://{host}:{port}",
                 "--runs-dir", str(tmp_path), "--no-collectors", "--set", f"target.timeout_s={TIMEOUT_S}",
                 "--set", "steps=[{users: 4, duration_s: 3, warmup_s: 0.5}]"],
                cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
            )  # fmt: skip
        finally:
            app.released.set()
    assert proc.returncode == 1, proc.stderr[-3000:]  # a quarter of the requests failed: over the budget
    budget = [line for line in proc.stderr.splitlines() if "exceeds the scenario's error budget" in line]
    assert len(budget) == 1 and "timed out" in budget[0], budget  # the one-line reason names the timeout
    folder = RunFolder(Path(proc.stdout.strip().splitlines()[-1].removeprefix("run folder: ")))
    rows = read_requests_table(folder).to_pylist()
    failed = [r for r in rows if not r["ok"]]
    assert failed and len(failed) <= app.held
    for r in failed:
        assert error_kind(r["status_code"], r["error"]) == "timeout", r["error"]
        assert r["status_code"] is None  # no answer came back
        assert r["latency_ms"] >= TIMEOUT_S * 1000 * 0.99  # the client waited its timeout, then gave up
    assert all(r["ok"] and r["status_code"] == 200 for r in rows if r not in failed)
    [step] = analyse_folder(folder).summary.steps
    timed_out = [r for r in failed if step.stats.steady_start_unix_s <= r["t_sent_unix_s"]]
    assert step.stats.n_timeout == len(timed_out) > 0 and step.stats.n_error == 0
    assert step.stats.errors_by_kind == {"timeout": len(timed_out)}

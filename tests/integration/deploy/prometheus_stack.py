"""Helpers for the deploy/ tests: a real Prometheus (the Debian package) scraping local targets every
second and evaluating rule files, an `embedperf agent` on the fake npu-smi, and promtool."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.conftest import free_port, stop_process

REPO_ROOT = Path(__file__).resolve().parents[3]
DEPLOY = REPO_ROOT / "deploy"
RULES = DEPLOY / "prometheus" / "embedperf-alerts.yml"
RULES_TESTS = DEPLOY / "prometheus" / "embedperf-alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "embedperf.json"
RENDER_RULES = DEPLOY / "render_rules.py"
FAKE_NPU_SMI = REPO_ROOT / "tests" / "fakes" / "npu_smi.py"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
SERVICE_JOB, AGENT_JOB = "embedperf-service", "embedperf-agent"  # the rules' and dashboard's job names
WAIT_TIMEOUT_S = 120.0  # a guard against a hang, not a performance bound
POLL_S = 0.25
T = TypeVar("T")


def require(tool: str) -> str:
    assert Path(tool).exists(), f"{tool} not installed; run `make system-deps` (Debian package prometheus)"
    return tool


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require(PROMTOOL), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def render_rules(out: Path, *flags: str) -> Path:
    """deploy/render_rules.py with `flags` (its CLI, as a user runs it) written to `out`."""
    done = subprocess.run(
        [sys.executable, str(RENDER_RULES), *flags, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def dashboard_targets() -> list[tuple[str, str]]:
    """(panel title, expr) of every query of every panel of the shipped dashboard."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    found: list[tuple[str, str]] = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            found += [(inner["title"], t["expr"]) for t in inner.get("targets", [])]
    return found


def wait_for(check: Callable[[], T | None], what: str, timeout_s: float = WAIT_TIMEOUT_S) -> T:
    """Poll `check` until it returns something other than None (the event a test waits for)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result is not None:
            return result
        assert time.monotonic() < deadline, f"{what}: not seen in {timeout_s:.0f} s"
        time.sleep(POLL_S)


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def _get(self, path: str, **params: str) -> Any:
        assert self.proc.poll() is None, f"prometheus exited; log: {self.log.read_text()[-2000:]}"
        body = httpx.get(f"{self.url}{path}", params=params, timeout=10).json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result: [{"metric": {...}, "value": [ts, "v"]}, ...]."""
        data = self._get("/api/v1/query", query=promql)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Every active alert (pending or firing): labels, state, activeAt."""
        return list(self._get("/api/v1/alerts")["alerts"])

    def scraped_once(self, job: str, targets: int) -> bool | None:
        """True once `targets` targets of `job` have been scraped successfully (None before)."""
        return len(self.query(f'up{{job="{job}"}} == 1')) >= targets or None


@contextmanager
def running_prometheus(
    tmp_path: Path,
    jobs: dict[str, list[str]],
    rule_files: tuple[Path, ...] = (),
    later_jobs: tuple[str, ...] = (),
) -> Iterator[Prometheus]:
    """A real Prometheus scraping `jobs` ({job: [host:port, ...]}) and evaluating the rules every second;
    yields once every target has been scraped, but those of `later_jobs` (targets that start afterwards)."""
    config = tmp_path / "prometheus.yml"
    scrape = "".join(
        f"  - job_name: {job}\n    static_configs:\n      - targets: {json.dumps(targets)}\n"
        for job, targets in jobs.items()
    )
    rules = "".join(f"  - {json.dumps(str(p))}\n" for p in rule_files)
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + (f"rule_files:\n{rules}" if rules else "")
        + f"scrape_configs:\n{scrape}",
        encoding="utf-8",
    )
    port = free_port()
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                require(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:

        def ready() -> bool | None:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                return httpx.get(f"{server.url}/-/ready", timeout=2).status_code == 200 or None
            except httpx.HTTPError:
                return None

        wait_for(ready, "Prometheus ready")
        for job, targets in jobs.items():
            if job not in later_jobs:
                wait_for(partial(server.scraped_once, job, len(targets)), f"{job} scraped")
        yield server
    finally:
        stop_process(proc)


def fake_npu_smi(tmp_path: Path) -> Path:
    """An executable `npu-smi` in tmp_path running the fake with this interpreter."""
    exe = tmp_path / "npu-smi"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_NPU_SMI}" "$@"\n', encoding="utf-8")
    exe.chmod(0o755)
    return exe


@contextmanager
def running_agent(tmp_path: Path, fake_env: dict[str, str]) -> Iterator[str]:
    """`embedperf agent` sampling the fake npu-smi (configured by FAKE_NPU_* in fake_env) and the host;
    yields host:port once its /metrics holds npu-smi figures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NPU")}
    env.update(fake_env)
    env.pop("EMBEDPERF_AGENT_TOKEN", None)
    args = ["--port", "0", "--npu-smi", str(fake_npu_smi(tmp_path)), "--sources", "npu_smi,host"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "embedperf.cli", "agent", *args, "--host-label", "svc-host"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"on http://(\S+) ", line)
        assert match, f"agent did not start: {line}"
        address = match.group(1)

        def sampling() -> bool | None:
            text = httpx.get(f"http://{address}/metrics", timeout=2).text
            return ("embedperf_temp_c{" in text and "embedperf_device_healthy{" in text) or None

        wait_for(sampling, "agent /metrics with npu-smi figures and health")
        yield address
    finally:
        stop_process(proc)  # type: ignore[arg-type]


def finite(result: list[dict[str, Any]]) -> bool:
    """Whether an instant query's result holds at least one finite sample."""
    return any(math.isfinite(float(r["value"][1])) for r in result)

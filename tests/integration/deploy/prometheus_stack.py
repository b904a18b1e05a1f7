"""Helpers for the deploy/ tests: an `embedperf agent` on the fake npu-smi, promtool, the shipped rules and
dashboard; the real Prometheus they run is tests/prometheus_server.py's (re-exported here)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.agent_process import agent_process
from tests.integration.collectors.collector_run import fake_npu_smi
from tests.prometheus_server import Prometheus, require, running_prometheus, wait_for

__all__ = ["Prometheus", "require", "running_prometheus", "wait_for"]

REPO_ROOT = Path(__file__).resolve().parents[3]
DEPLOY = REPO_ROOT / "deploy"
RULES = DEPLOY / "prometheus" / "embedperf-alerts.yml"
RULES_TESTS = DEPLOY / "prometheus" / "embedperf-alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "embedperf.json"
RENDER_RULES = DEPLOY / "render_rules.py"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
SERVICE_JOB, AGENT_JOB = "embedperf-service", "embedperf-agent"  # the rules' and dashboard's job names


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


@contextmanager
def running_agent(tmp_path: Path, fake_env: dict[str, str]) -> Iterator[str]:
    """`embedperf agent` sampling the fake npu-smi (configured by FAKE_NPU_* in fake_env) and the host;
    yields host:port once its /metrics holds npu-smi figures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NPU")}
    env.update(fake_env)
    env.pop("EMBEDPERF_AGENT_TOKEN", None)
    args = ["--npu-smi", str(fake_npu_smi(tmp_path)), "--sources", "npu_smi,host", "--host-label", "svc-host"]
    with agent_process(*args, env=env) as (url, _):

        def sampling() -> bool | None:
            text = httpx.get(f"{url}/metrics", timeout=2).text
            return ("embedperf_temp_c{" in text and "embedperf_device_healthy{" in text) or None

        wait_for(sampling, "agent /metrics with npu-smi figures and health")
        yield url.removeprefix("http://")


def finite(result: list[dict[str, Any]]) -> bool:
    """Whether an instant query's result holds at least one finite sample."""
    return any(math.isfinite(float(r["value"][1])) for r in result)

"""A real Prometheus (the Debian package) for the tests: scraping local targets every second and
evaluating rule files, ready once each target has been scraped; and `wait_for`, the poll every such
test waits with."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from loadgen.processes.child import stop_child
from loadgen.processes.service_proc import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
WAIT_TIMEOUT_S = 120.0  # a guard against a hang, not a performance bound
POLL_S = 0.25
T = TypeVar("T")


def require(tool: str) -> str:
    assert Path(tool).exists(), f"{tool} not installed; run `make system-deps` (Debian package prometheus)"
    return tool



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
    http: httpx.Client  # one client for every poll: building one costs ~40 ms of CPU

    def _get(self, path: str, **params: str) -> Any:
        assert self.proc.poll() is None, f"prometheus exited; log: {self.log.read_text()[-2000:]}"
        body = self.http.get(f"{self.url}{path}", params=params, timeout=10).json()
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
    server = Prometheus(f"http://127.0.0.1:{port}", proc, log, httpx.Client())
    try:

        def ready() -> bool | None:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                return server.http.get(f"{server.url}/-/ready", timeout=2).status_code == 200 or None
            except httpx.HTTPError:
                return None

        wait_for(ready, "Prometheus ready")
        for job, targets in jobs.items():
            if job not in later_jobs:
                wait_for(partial(server.scraped_once, job, len(targets)), f"{job} scraped")
        yield server
    finally:
        server.http.close()
        stop_child(proc, 15.0)

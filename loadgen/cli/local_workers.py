"""`embedperf run --workers N`: N Locust worker processes on this host beside the master, stopped by PID.

One gevent process drives about one core; on a multi-core generator the workers spread the load over the cores
while the master writes the one run folder. Each worker is told to die with its parent (Linux parent-death
signal), so even a killed `embedperf run` leaves no worker behind."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from embedperf.errors import ConfigError
from loadgen.cli.runner import locustfile_for
from loadgen.processes.child import sigterm_on_parent_death
from loadgen.processes.service_proc import free_port
from scenarios.loader import load_scenario

MASTER_HOST = "127.0.0.1"
EXPECT_WORKERS_MAX_WAIT_S = 60
STOP_GRACE_S = 10.0


class LocalWorkers:
    """`count` workers of `locustfile` for a master on 127.0.0.1:master_port (0: one process)."""

    def __init__(self, count: int, locustfile: Path, master_port: int | None = None) -> None:
        if count < 0:
            raise ConfigError(f"--workers must be 0 (one process) or more, not {count}")
        self.count = count
        self.locustfile = locustfile
        self.master_port = master_port or (free_port(MASTER_HOST) if count else 0)
        self.procs: list[subprocess.Popen[bytes]] = []

    def master_args(self) -> list[str]:
        """The options that make the `locust` command the master these workers connect to."""
        if not self.count:
            return []
        return [
            "--master", "--master-bind-host", MASTER_HOST, "--master-bind-port", str(self.master_port),
            "--expect-workers", str(self.count), "--expect-workers-max-wait", str(EXPECT_WORKERS_MAX_WAIT_S),
        ]

    def worker_command(self) -> list[str]:
        return [
            sys.executable, "-m", "locust", "-f", str(self.locustfile), "--worker",
            "--master-host", MASTER_HOST, "--master-port", str(self.master_port), "--loglevel", "WARNING",
        ]  # fmt: skip

    @classmethod
    def for_scenario(
        cls, count: int, scenario: str, profile: str | None = None, overrides: Mapping[str, str] | None = None
    ) -> LocalWorkers:
        """Workers running the locustfile of the scenario's kind (ramp, openloop, soak, spike)."""
        if count == 0:
            return cls(0, Path())
        kind = load_scenario(scenario, profile=profile, overrides=overrides).kind
        return cls(count, locustfile_for(kind))

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def start(self) -> LocalWorkers:
        """Workers may start before the master: they keep trying to connect."""
        cwd = Path(__file__).resolve().parents[2]
        for _ in range(self.count):  # each asks, between fork and exec, to die with this process
            guard = sigterm_on_parent_death
            self.procs.append(
                subprocess.Popen(self.worker_command(), cwd=cwd, stdout=subprocess.DEVNULL, preexec_fn=guard)
            )
        return self

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Workers quit when the master tells them; any still running gets SIGTERM, then SIGKILL, by PID."""
        for escalate in (subprocess.Popen.terminate, subprocess.Popen.kill):
            deadline = time.monotonic() + grace_s
            for proc in self.procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    escalate(proc)
        for proc in self.procs:
            proc.wait(timeout=5)

    def __enter__(self) -> LocalWorkers:
        return self.start()

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.stop(grace_s=STOP_GRACE_S if exc is None else 0.5)

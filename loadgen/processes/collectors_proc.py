"""Run `python -m collectors` beside the load for the run's duration and read back its statuses. The child
runs through this module, which asks Linux to SIGTERM it when its parent dies and watches the parent pid, so a
SIGKILLed Locust leaves no sampler behind."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from embedperf.schema import AgentRecord, CollectorStatus, RunFolder
from loadgen.processes.child import sigterm_on_parent_death, stop_child

STOP_GRACE_S = 15.0
WATCHDOG_INTERVAL_S = 1.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def collectors_available() -> bool:
    try:
        return importlib.util.find_spec("collectors.__main__") is not None
    except (ImportError, ValueError):
        return False


class CollectorsProcess:
    """The telemetry collectors as a subprocess writing into the run folder."""

    def __init__(
        self, folder: RunFolder, service_url: str, generator_pid: int, interval_s: float = 1.0,
        extra_args: list[str] | None = None, agents: list[str] | None = None,
        service_metrics: Mapping[str, str] | None = None,
    ) -> None:
        """service_metrics: canonical metric -> the target's own Prometheus name (its protocol's)."""
        self.folder = folder
        self.cmd = [  # `python -m collectors ARGS`, run through this module's parent-death guard
            sys.executable, "-m", "loadgen.processes.collectors_proc", "--parent-pid", str(os.getpid()), "--",
            "--out", str(folder.root.resolve()),  # absolute: the child starts in REPO_ROOT, not here
            "--interval", str(interval_s), "--sources", "auto", "--service-url", service_url,
            "--generator-pid", str(generator_pid), *(extra_args or []),
        ]  # fmt: skip
        for agent in agents or []:
            self.cmd += ["--agent", agent]
        for metric, name in (service_metrics or {}).items():
            self.cmd += ["--service-metric", f"{metric}={name}"]
        self.log_path = folder.root / "collectors.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_error = ""

    def start(self) -> None:
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    self.cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=dict(os.environ)
                )
        except OSError as exc:
            self.start_error = f"could not start collectors: {exc}"

    def stop(self) -> list[CollectorStatus]:
        """SIGTERM, wait, then read collectors.json; failures become statuses, never exceptions."""
        if self.proc is None:
            return [_failed(self.start_error or "not started")]
        returncode = stop_child(self.proc, STOP_GRACE_S)
        if statuses := read_statuses(self.folder):
            return statuses
        tail = self.log_path.read_text(errors="replace")[-500:] if self.log_path.is_file() else ""
        why = f"exited with {returncode} without writing collectors.json; log tail: {tail.strip()}"
        return [_failed(why)]


def _failed(reason: str, name: str = "collectors") -> CollectorStatus:
    return CollectorStatus(name=name, status="failed", reason=reason)


def read_statuses(folder: RunFolder) -> list[CollectorStatus]:
    path = folder.collectors_status
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [_failed(f"unreadable {path.name}: {exc}")]
    out: list[CollectorStatus] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append(CollectorStatus.model_validate(item))
        except ValidationError as exc:
            out.append(_failed(f"bad status: {exc}", name=str(item.get("name", "?"))))
    return out


def die_with_parent(parent_pid: int) -> None:
    """SIGTERM this process when `parent_pid` dies: the Linux parent-death signal, and a pid watchdog for
    systems without it that exits hard STOP_GRACE_S later."""
    sigterm_on_parent_death()
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watchdog", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCHDOG_INTERVAL_S)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_GRACE_S)
    os._exit(3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loadgen.processes.collectors_proc", description=__doc__)
    parser.add_argument("--parent-pid", type=int, required=True, help="exit when this process dies")
    parser.add_argument("collector_args", nargs=argparse.REMAINDER, help="-- then `python -m collectors` args")
    args = parser.parse_args(argv)
    rest = args.collector_args[1:] if args.collector_args[:1] == ["--"] else args.collector_args
    die_with_parent(args.parent_pid)
    sys.argv = ["collectors", *rest]
    runpy.run_module("collectors", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()


def read_agent_records(folder: RunFolder) -> list[AgentRecord]:
    """agents.json (clock offsets and missing seconds of each `embedperf agent`), [] when absent or unreadable."""
    path = folder.agents_status
    if not path.is_file():
        return []
    try:
        return [AgentRecord.model_validate(item) for item in json.loads(path.read_text(encoding="utf-8"))]
    except (OSError, ValueError):
        return []

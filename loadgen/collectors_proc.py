"""Run `python -m collectors` beside the load for the run's duration and read back its statuses."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from pydantic import ValidationError

from embedperf.schema import CollectorStatus, RunFolder

STOP_GRACE_S = 15.0
REPO_ROOT = Path(__file__).resolve().parents[1]


def collectors_available() -> bool:
    try:
        return importlib.util.find_spec("collectors.__main__") is not None
    except (ImportError, ValueError):
        return False


class CollectorsProcess:
    """The telemetry collectors as a subprocess writing into the run folder."""

    def __init__(
        self, folder: RunFolder, service_url: str, generator_pid: int, interval_s: float = 1.0
    ) -> None:
        self.folder = folder
        self.cmd = [
            sys.executable,
            "-m",
            "collectors",
            "--out",
            str(folder.root),
            "--interval",
            str(interval_s),
            "--sources",
            "auto",
            "--service-url",
            service_url,
            "--generator-pid",
            str(generator_pid),
        ]
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
            return [
                CollectorStatus(name="collectors", status="failed", reason=self.start_error or "not started")
            ]
        returncode = self.proc.poll()
        if returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                returncode = self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                returncode = self.proc.wait(timeout=5)
        statuses = read_statuses(self.folder)
        if statuses:
            return statuses
        tail = self.log_path.read_text(errors="replace")[-500:] if self.log_path.is_file() else ""
        return [
            CollectorStatus(
                name="collectors",
                status="failed",
                reason=f"exited with {returncode} without writing collectors.json; log tail: {tail.strip()}",
            )
        ]


def read_statuses(folder: RunFolder) -> list[CollectorStatus]:
    path = folder.collectors_status
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [CollectorStatus(name="collectors", status="failed", reason=f"unreadable {path.name}: {exc}")]
    out: list[CollectorStatus] = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append(CollectorStatus.model_validate(item))
        except ValidationError as exc:
            out.append(
                CollectorStatus(name=str(item.get("name", "?")), status="failed", reason=f"bad status: {exc}")
            )
    return out

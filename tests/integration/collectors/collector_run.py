"""Helpers: run `python -m collectors` as the load runs do (subprocess, SIGTERM) and read what it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from embedperf.schema import TELEMETRY_SCHEMA, RunFolder, read_telemetry_table

REPO_ROOT = Path(__file__).resolve().parents[3]
FAKE_NPU_SMI = REPO_ROOT / "tests" / "fakes" / "npu_smi.py"
WAIT_TIMEOUT_S = 120.0  # a guard against a hang, not a performance bound
POLL_S = 0.25


def fake_npu_smi(tmp_path: Path) -> Path:
    """An executable `npu-smi` in tmp_path running the fake with this interpreter. Written once: a second
    write while a process started earlier runs it would fail with ETXTBSY (text file busy)."""
    exe = tmp_path / "npu-smi"
    script = f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_NPU_SMI}" "$@"\n'
    if not exe.is_file() or exe.read_text(encoding="utf-8") != script:
        exe.write_text(script, encoding="utf-8")
        exe.chmod(0o755)
    return exe


def start_collector(out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = open(out.parent / f"{out.name}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "collectors", "--out", str(out), *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop_collector(proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> int:
    """SIGTERM, as the load runs stop it; the collector must exit 0 on its own."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise AssertionError("collector ignored SIGTERM") from None


def written_so_far(out: Path) -> pd.DataFrame:
    """The samples a running collector has flushed so far (its telemetry parts, read as a crash would)."""
    folder = RunFolder(out)
    if not folder.telemetry_parts.is_dir():
        return TELEMETRY_SCHEMA.empty_table().to_pandas()
    return read_telemetry_table(folder).to_pandas()


def wait_until(
    proc: subprocess.Popen[bytes], out: Path, done: Callable[[pd.DataFrame], bool], what: str
) -> pd.DataFrame:
    """Poll what the running collector has written until `done` holds: the event a test waits for,
    in place of a sleep long enough for it on an idle host."""
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while True:
        assert proc.poll() is None, f"collector exited early; log: {collector_log(out)}"
        frame = written_so_far(out)
        if done(frame):
            return frame
        assert time.monotonic() < deadline, (
            f"{what}: not seen in {WAIT_TIMEOUT_S:.0f} s; log: {collector_log(out)}"
        )
        time.sleep(POLL_S)


def read_outputs(out: Path) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    folder = RunFolder(out)
    assert folder.telemetry.is_file(), f"no telemetry.parquet; log: {collector_log(out)}"
    assert not folder.telemetry_parts.exists(), "parts must be compacted at exit"
    frame = read_telemetry_table(folder).to_pandas()
    status = {s["name"]: s for s in json.loads(folder.collectors_status.read_text(encoding="utf-8"))}
    return frame, status


def collector_log(out: Path) -> str:
    path = out.parent / f"{out.name}.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def event_kinds(status: dict[str, Any], device: str | None = None) -> list[str]:
    return [e["kind"] for e in status["events"] if device is None or e["device"] == device]

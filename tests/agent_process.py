"""`embedperf agent` started by a test: on a free port, its URL read from the line it prints first, stopped by
PID (SIGTERM, SIGKILL after its grace) at the end. Each test waits for what it needs from it (samples,
npu-smi figures on /metrics)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loadgen.processes.child import stop_child

REPO_ROOT = Path(__file__).resolve().parents[1]
STOP_GRACE_S = 15.0


@contextmanager
def agent_process(
    *args: str, env: dict[str, str], stderr: int = subprocess.STDOUT
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`embedperf agent --port 0 ARGS` under `env`; yields its base URL (http://host:port) and the process.
    stderr=subprocess.PIPE keeps its warnings apart for the test to read once it is stopped."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "embedperf.cli", "agent", "--port", "0", *args],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"on (http://\S+) ", line)
        assert match, f"agent did not start: {line}{proc.stdout.read() if proc.poll() is not None else ''}"
        yield match.group(1), proc
    finally:
        stop_child(proc, STOP_GRACE_S)

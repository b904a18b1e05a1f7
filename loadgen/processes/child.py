"""Stopping a child process we started: SIGTERM by its PID, then SIGKILL once its grace is over."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

KILL_WAIT_S = 5.0


def stop_child(proc: subprocess.Popen[Any], grace_s: float) -> int:
    """SIGTERM, wait up to grace_s for a clean exit, then SIGKILL; the child's exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=KILL_WAIT_S)

"""A child server we started: waiting until it answers its health URL, and stopping it by its PID
(SIGTERM, then SIGKILL once its grace is over)."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from embedperf.errors import TargetError

KILL_WAIT_S = 5.0
POLL_INTERVAL_S = 0.25
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def wait_until_answering(
    proc: subprocess.Popen[Any], url: str, name: str, timeout_s: float,
    log_tail: Callable[[], str] = lambda: "",
) -> None:
    """Poll GET url until it answers 200; an exit or timeout first is a TargetError with `log_tail()`."""
    deadline = time.monotonic() + timeout_s
    # one client for every poll: building one costs ~40 ms of CPU (it loads the CA bundle)
    with httpx.Client(timeout=1.0, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise TargetError(f"{name} exited with {proc.returncode} before {url} answered 200{log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get(url).status_code == 200:
                    return
            time.sleep(POLL_INTERVAL_S)
    raise TargetError(f"{name} did not answer {url} with 200 within {timeout_s:.0f} s{log_tail()}")


def stop_child(proc: subprocess.Popen[Any], grace_s: float) -> int:
    """SIGTERM, wait up to grace_s for a clean exit, then SIGKILL; the child's exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=KILL_WAIT_S)


def sigterm_on_parent_death() -> None:
    """Ask Linux to SIGTERM this process when its parent dies (prctl PR_SET_PDEATHSIG); elsewhere nothing."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

"""Fixtures shared by every test package: the shared npu-smi samples and a real reference service."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
SERVICE_READY_TIMEOUT_S = 180.0


@pytest.fixture(scope="session")
def npu_smi_fixtures() -> Path:
    path = SHARED_DIR / "fixtures" / "npu-smi"
    assert path.is_dir(), f"shared fixtures missing at {path}; ../shared must sit beside the repository"
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_service(extra_args: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start `python -m service` on a free loopback port and wait for /ready. Caller stops it."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port), *extra_args],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=REPO_ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVICE_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/ready", timeout=1.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    stop_process(proc)
    raise RuntimeError(f"service not ready after {SERVICE_READY_TIMEOUT_S}s: {log_path.read_text()[-2000:]}")


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def reference_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real reference service (MiniLM on CPU, batching on), shared by the whole session."""
    log_path = tmp_path_factory.mktemp("service") / "service.log"
    proc, url = start_service([], log_path)
    try:
        yield url
    finally:
        stop_process(proc)

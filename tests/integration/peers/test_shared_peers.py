"""A peer server shared by the session's workers (tests/peers/shared.py): started once whoever asks, and
stopped by PID when the session that made its folder closes; a nested session never stops it.

The "server" here is Python's http.server (it answers GET / with 200), so the sharing is checked without
the peers' environments.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from benchmarks.peer_launch import HOST, PeerCommand
from loadgen.processes.service_proc import free_port
from tests.peers import shared

STARTS: list[int] = []


def http_server() -> PeerCommand:
    STARTS.append(1)
    port = free_port(HOST)
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", HOST]
    return PeerCommand("http.server", argv, port, "/")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(shared.RUN_DIR_ENV, raising=False)
    run_dir = shared.open_session()
    assert run_dir is not None and os.environ[shared.RUN_DIR_ENV] == str(run_dir)
    return run_dir


def test_one_server_for_every_ask_stopped_when_the_session_closes(session: Path) -> None:
    STARTS.clear()
    with ThreadPoolExecutor(max_workers=3) as pool:  # three asks at once, as three workers would
        peers = list(pool.map(lambda _: shared.shared_peer("web", http_server), range(3)))
    assert len(STARTS) == 1 and len({p.pid for p in peers}) == 1 and len({p.url for p in peers}) == 1
    pid = peers[0].pid
    assert not gone(pid)
    assert shared.open_session() is None  # a nested session shares the folder and owns nothing
    shared.close_session(session)
    deadline = time.monotonic() + 10.0
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid), "the shared server outlived its session"
    assert not session.exists() and shared.RUN_DIR_ENV not in os.environ


def test_a_pid_that_is_now_another_program_is_left_alone(session: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = shared.SharedPeer(
            name="web", url="http://127.0.0.1:1", api_url="http://127.0.0.1:1", pid=other.pid,
            executable="/nonexistent/infinity_emb", log_path=str(session / "web.log"),
        )  # fmt: skip
        shared.stop(record, grace_s=1.0)
        assert other.poll() is None, "a PID recorded for another program was signalled"
    finally:
        other.kill()
        other.wait()
        shared.close_session(session)

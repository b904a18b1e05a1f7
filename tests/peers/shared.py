"""One peer server per test session, shared by every xdist worker, stopped by PID when the session ends.

A peer server (Infinity, KServe) takes 10-15 s of CPU to import its framework and load the model. Asked
for by tests on several workers, each worker would start its own; instead the first worker to ask starts
it under a file lock and records its URL and PID in the session's folder, and every later ask, from any
worker, reads that record. The process that made the folder (the xdist controller, or pytest itself
without xdist: `open_session`/`close_session` from tests/conftest.py) stops every recorded server after
all tests ran, once no worker can still be driving it. A nested pytest run inherits the folder and
shares the servers; it never stops them.

A server that fails to start leaves no record: the test that asked fails with the server's output, and
the next ask tries again.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from benchmarks.peer_launch import STOP_GRACE_S, PeerCommand, PeerProcess

RUN_DIR_ENV = "EMBEDPERF_TEST_PEERS_RUN_DIR"
KILL_WAIT_S = 5.0
# The servers this process started, held until it exits: a Popen collected while its process runs warns
# (ResourceWarning), and this one's process is meant to outlive the worker that started it.
_STARTED: list[PeerProcess] = []


@dataclass(frozen=True)
class SharedPeer:
    """A running peer server as the tests see it: where to send requests, and which process it is."""

    name: str
    url: str  # the base URL, what a user passes as --host
    api_url: str  # the base URL with the server's API prefix ("/v1" for the vLLM-style layout)
    pid: int
    executable: str  # argv[0], checked before the PID is signalled (a PID can be reused)
    log_path: str


def open_session() -> Path | None:
    """Make the session's folder for shared servers and export it to the workers; None when a parent
    session already did (then that session stops the servers)."""
    if RUN_DIR_ENV in os.environ:
        return None
    run_dir = Path(tempfile.mkdtemp(prefix="embedperf-test-peers-"))
    os.environ[RUN_DIR_ENV] = str(run_dir)
    return run_dir


def close_session(run_dir: Path) -> None:
    """Stop every server recorded in run_dir (SIGTERM, SIGKILL after the grace), then remove the folder."""
    peers = [SharedPeer(**json.loads(r.read_text(encoding="utf-8"))) for r in sorted(run_dir.glob("*.json"))]
    with ThreadPoolExecutor(max_workers=max(len(peers), 1)) as pool:  # each one's grace at the same time
        list(pool.map(stop, peers))
    if os.environ.get(RUN_DIR_ENV) == str(run_dir):
        del os.environ[RUN_DIR_ENV]
    shutil.rmtree(run_dir, ignore_errors=True)


def shared_peer(name: str, command: Callable[[], PeerCommand]) -> SharedPeer:
    """The session's server `name`, started from `command()` by the first caller of any worker."""
    run_dir = Path(os.environ[RUN_DIR_ENV])
    record = run_dir / f"{name}.json"
    with open(run_dir / f"{name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes; a worker that dies drops it too
        if record.is_file():
            return SharedPeer(**json.loads(record.read_text(encoding="utf-8")))
        peer = PeerProcess(command(), run_dir / name / "server.log").start()
        _STARTED.append(peer)
        shared = SharedPeer(
            name=name,
            url=peer.url,
            api_url=peer.api_url,
            pid=peer.pid,
            executable=peer.command.argv[0],
            log_path=str(peer.log_path),
        )
        record.write_text(json.dumps(asdict(shared)), encoding="utf-8")
        return shared


def stop(peer: SharedPeer, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the server by PID, SIGKILL after grace_s; a PID that is gone, a zombie (its worker exited
    and it awaits its reaper) or now another program is left alone."""
    try:
        proc = psutil.Process(peer.pid)
        if peer.executable not in proc.cmdline():
            return
        proc.terminate()
        if not _ended(proc, grace_s):
            proc.kill()
            _ended(proc, KILL_WAIT_S)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return


def _ended(proc: psutil.Process, timeout_s: float) -> bool:
    try:
        proc.wait(timeout_s)
    except psutil.TimeoutExpired:
        return proc.status() == psutil.STATUS_ZOMBIE
    return True

"""PeerProcess.stop leaves nothing running: a server's own child processes (vLLM's engine runs in one)
that outlive their parent are stopped by PID too. The "server" is Python's http.server, started after
a child that ignores SIGTERM, so no peer environment is needed."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import psutil

from benchmarks.peer_launch import HOST, PeerCommand, PeerProcess
from loadgen.processes.service_proc import free_port

# Starts a child that ignores SIGTERM and sleeps, prints its PID, then becomes http.server (same PID).
SERVER_WITH_STUBBORN_CHILD = textwrap.dedent(
    """
    import os, subprocess, sys
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"])
    print("child", child.pid, flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "http.server", sys.argv[1], "--bind", sys.argv[2]])
    """
)


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_stop_also_stops_a_child_that_outlives_the_server(tmp_path: Path) -> None:
    port = free_port(HOST)
    argv = [sys.executable, "-c", SERVER_WITH_STUBBORN_CHILD, str(port), HOST]
    peer = PeerProcess(PeerCommand("stubborn", argv, port, "/"), tmp_path / "server.log", ready_timeout_s=30)
    with peer:
        line = next(
            ln for ln in (tmp_path / "server.log").read_text().splitlines() if ln.startswith("child ")
        )
        child = int(line.split()[1])
        assert running(child)
        server = peer.pid
        peer.stop(grace_s=1.0)
    assert not running(server)
    assert not running(child)  # SIGTERM was ignored: killed by PID after the grace

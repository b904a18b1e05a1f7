"""A private, throw-away redis-server on a free loopback port (the shared-cache configuration and its tests).

Nothing is persisted (`--save '' --appendonly no`, working directory in a folder the caller owns); it is
stopped by PID."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from embedperf.errors import ConfigError, TargetError
from loadgen.processes.service_proc import free_port

READY_TIMEOUT_S = 20.0
POLL_INTERVAL_S = 0.05


def redis_server_path() -> str:
    """The redis-server executable, or a ConfigError that says how to install it."""
    path = shutil.which("redis-server")
    if path is None:
        raise ConfigError(
            "redis-server not found on PATH; install it with `apt-get install redis-server` "
            "(`make system-deps` does) or leave out the shared-cache configuration"
        )
    return path


def _answers_ping(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """`with RedisServer(folder) as redis:` answers PING inside; stop() then start() keeps the port."""

    def __init__(self, folder: Path, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.folder = folder
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        cmd = [
            redis_server_path(), "--bind", self.host, "--port", str(self.port), "--save", "",
            "--appendonly", "no", "--dir", str(self.folder),
        ]
        with open(self.folder / "redis.log", "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _answers_ping(self.host, self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.folder / "redis.log").read_text(errors="replace")[-500:]
                raise TargetError(f"redis-server did not start on {self.host}:{self.port}; log tail:\n{tail}")
            time.sleep(POLL_INTERVAL_S)
        return self

    def stop(self) -> None:
        """SIGKILL by PID: an abrupt outage, the case the cache has to survive."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

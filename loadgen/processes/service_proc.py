"""Start and stop the reference service (`python -m service`) around a run, by PID."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from embedperf.errors import TargetError
from loadgen.processes.child import stop_child, wait_until_answering

REPO_ROOT = Path(__file__).resolve().parents[2]
STOP_GRACE_S = 20.0
# The ramp draws the latency curve up to its highest load, so the service `embedperf bench` starts queues
# rather than sheds within the ramp (a 30 s deadline, admission up to the whole of it); `--service-arg`
# comes after and wins.
RAMP_SERVICE_ARGS = ("--deadline-ms", "30000", "--admit-wait-share", "1.0")


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServiceProcess:
    """`with ServiceProcess([...]) as svc:` -- the service is ready (GET /ready == 200) inside."""

    def __init__(
        self, args: list[str], host: str = "127.0.0.1", port: int | None = None, log_path: Path | None = None,
        ready_timeout_s: float = 180, cwd: Path | None = None,
    ) -> None:
        self.args = list(args)
        # where `python -m service` starts: its modules come first on sys.path (bench-ab runs an older tree)
        self.cwd = cwd or REPO_ROOT
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise TargetError("the service is not running")
        return self.proc.pid

    def start(self) -> ServiceProcess:
        if port_in_use(self.host, self.port):
            raise TargetError(
                f"port {self.port} on {self.host} is already in use; stop the process listening there "
                f"or choose another port (PORT=... for make, --port for embedperf)"
            )
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        cmd = [sys.executable, "-m", "service", "--host", self.host, "--port", str(self.port), *self.args]
        with open(self.log_path or os.devnull, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.cwd)
        try:
            wait_until_answering(self.proc, f"{self.url}/ready", "the service", self.ready_timeout_s, self._tail)
        except TargetError:
            self.stop()
            raise
        return self

    def _tail(self) -> str:
        if self.log_path and self.log_path.is_file():
            return f"; log tail ({self.log_path}):\n{self.log_path.read_text(errors='replace')[-2000:]}"
        return ""

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM by PID, then SIGKILL after grace_s."""
        if self.proc is not None:
            stop_child(self.proc, grace_s)

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

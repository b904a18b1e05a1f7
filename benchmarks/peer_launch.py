"""Start and stop real third-party embedding servers (Infinity, vLLM's CPU server; the tests add a KServe v2
model server) by PID.

Each runs from its own virtual environment under `.peers/` (`make peers-setup`, `make peers-setup-vllm`), on a free 127.0.0.1
port, serving a local model folder with the hubs switched off, so a test or `make peers` drives the same
servers users run, not a stand-in written here. Start-up waits for the server's own health endpoint;
a server that exits or never answers raises TargetError with the tail of its log, which is where the
reason (a wrong model folder, a missing package) is.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import psutil

from embedperf.errors import TargetError
from loadgen.processes.child import stop_child, wait_until_answering
from loadgen.processes.service_proc import free_port

# Where `make peers-setup` puts the environments (PEERS in the Makefile, exported as EMBEDPERF_PEERS_DIR).
PEERS_DIR = Path(os.environ.get("EMBEDPERF_PEERS_DIR") or Path.home() / ".cache" / "embedperf" / "peers")
HOST = "127.0.0.1"
READY_TIMEOUT_S = 300.0  # a model load on a busy 2-core host; a server that dies is reported at once
STOP_GRACE_S = 20.0
KILL_WAIT_S = 5.0
LOG_TAIL_CHARS = 3000
# Names a vLLM-style server is given and embedperf is not told. Infinity answers any model name when it
# serves one model, so the model is served under two: an unknown name then gets 400 with the list.
VLLM_STYLE_MODEL_NAMES = ("team-embedder-v3", "team-embedder-v3-canary")
# Offline, and no usage report home (Infinity sends anonymous statistics unless told not to).
PEER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "INFINITY_ANONYMOUS_USAGE_STATS": "0",
}


# The make target that creates an environment, where it is not `peers-setup` (too heavy for make test).
SETUP_TARGETS = {"vllm": "peers-setup-vllm"}


def peer_bin(venv: str, program: str) -> Path:
    """`<PEERS_DIR>/<venv>/bin/<program>`, or a TargetError that says how to create it."""
    path = PEERS_DIR / venv / "bin" / program
    if not path.is_file():
        target = SETUP_TARGETS.get(venv, "peers-setup")
        raise TargetError(f"{path} is missing; create the peer servers' environments with `make {target}`")
    return path


@dataclass(frozen=True)
class PeerCommand:
    """How to start one server and how to tell it is ready: the command line, health path, extra env."""

    name: str
    argv: list[str]
    port: int
    health_path: str
    api_prefix: str = ""  # where its API lives under the base URL ("/v1" for a vLLM-style server)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def infinity_command(
    model_dir: Path,
    port: int | None = None,
    served_model_names: tuple[str, ...] = (),
    url_prefix: str = "",
    torch_threads: int | None = None,
    warmup: bool = False,
) -> PeerCommand:
    """`infinity_emb v2 --engine torch` on `model_dir`, fp32, no vector cache, batches of up to 32.

    With `served_model_names`, the folder is loaded once per name; `url_prefix="/v1"` moves
    `/embeddings` and `/models` (not `/health`) under it, as vLLM lays them out. Infinity's own warm-up
    (a few seconds of batches of 256-token inputs) is off unless asked for: tests need no timings."""
    port = free_port(HOST) if port is None else port
    argv = [
        str(peer_bin("infinity", "infinity_emb")),
        "v2",
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--batch-size",
        "32",
        "--no-vector-disk-cache",
        "--model-warmup" if warmup else "--no-model-warmup",
        "--host",
        HOST,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    argv += ["--model-id", str(model_dir)] * max(1, len(served_model_names))
    for name in served_model_names:
        argv += ["--served-model-name", name]
    if url_prefix:
        argv += ["--url-prefix", url_prefix]
    env = {"OMP_NUM_THREADS": str(torch_threads)} if torch_threads else {}
    return PeerCommand("infinity", argv, port, "/health", api_prefix=url_prefix, env=env)


def vllm_command(model_dir: Path, port: int | None = None) -> PeerCommand:
    """`vllm serve` on `model_dir` as a pooling model, fp32, inputs up to 256 tokens, OpenAI API under /v1.

    vLLM compiles the model (torch inductor) during start-up and runs it in an engine process apart from
    its API server; on CPU it binds its compute threads to the host's cores itself and keeps one for the
    API server (VLLM_CPU_OMP_THREADS_BIND=auto). VLLM_CPU_KVCACHE_SPACE=1 (GiB) sizes the cache an
    encoder does not use; the default would reserve 4 GiB."""
    port = free_port(HOST) if port is None else port
    argv = [
        str(peer_bin("vllm", "vllm")),
        "serve",
        str(model_dir),
        "--runner",
        "pooling",
        "--dtype",
        "float32",
        "--max-model-len",
        "256",
        "--host",
        HOST,
        "--port",
        str(port),
        "--uvicorn-log-level",
        "warning",
        "--disable-uvicorn-access-log",
    ]
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu", "VLLM_NO_USAGE_STATS": "1"}
    return PeerCommand("vllm", argv, port, "/health", api_prefix="/v1", env=env)


class PeerProcess:
    """`with PeerProcess(command, log_path) as peer:` -- the server answers its health path inside."""

    def __init__(
        self, command: PeerCommand, log_path: Path, ready_timeout_s: float = READY_TIMEOUT_S
    ) -> None:
        self.command = command
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The base URL, what a user passes as --host."""
        return self.command.url

    @property
    def api_url(self) -> str:
        """The base URL with the server's API prefix ("/v1" for the vLLM-style layout)."""
        return self.command.url + self.command.api_prefix

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise TargetError(f"{self.command.name} is not running")
        return self.proc.pid

    def start(self) -> PeerProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(PEER_ENV)
        env.update(self.command.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command.argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.log_path.parent
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        health = self.command.url + self.command.health_path
        wait_until_answering(self.proc, health, self.command.name, self.ready_timeout_s, self.log_tail)

    def log_tail(self) -> str:
        """The end of the server's output, for an error message."""
        if not self.log_path.is_file():
            return ""
        return f"; its output ({self.log_path}) ends:\n{self.log_path.read_text(errors='replace')[-LOG_TAIL_CHARS:]}"

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM by PID, SIGKILL after grace_s; then the same for any of its own child processes (vLLM's
        engine) still running, so a server killed before it could stop them leaves nothing behind."""
        if self.proc is None:
            return
        try:
            children = (
                psutil.Process(self.proc.pid).children(recursive=True) if self.proc.poll() is None else []
            )
        except psutil.NoSuchProcess:
            children = []
        stop_child(self.proc, grace_s)
        _, alive = psutil.wait_procs(children, timeout=grace_s if children else 0)
        for child in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(alive, timeout=KILL_WAIT_S)

    def __enter__(self) -> PeerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

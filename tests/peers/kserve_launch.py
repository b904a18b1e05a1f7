"""The KServe v2 peer the tests drive: KServe's Python model server with kserve_minilm.py beside this file."""

from __future__ import annotations

from pathlib import Path

from benchmarks.peer_launch import HOST, PeerCommand, peer_bin
from loadgen.processes.service_proc import free_port

KSERVE_SCRIPT = Path(__file__).resolve().parent / "kserve_minilm.py"
KSERVE_MODEL_NAME = "minilm"


def kserve_command(
    model_dir: Path,
    port: int | None = None,
    model_name: str = KSERVE_MODEL_NAME,
    torch_threads: int | None = None,
) -> PeerCommand:
    """KServe's ModelServer with kserve_minilm.py: REST v2 only (no gRPC port to collide)."""
    port = free_port(HOST) if port is None else port
    argv = [
        str(peer_bin("kserve", "python")),
        str(KSERVE_SCRIPT),
        "--model_name",
        model_name,
        "--model_dir",
        str(model_dir),
        "--http_port",
        str(port),
        "--enable_grpc",
        "false",
        "--enable_latency_logging",
        "false",
    ]
    if torch_threads:
        argv += ["--torch_threads", str(torch_threads)]
    return PeerCommand("kserve", argv, port, "/v2/health/ready")

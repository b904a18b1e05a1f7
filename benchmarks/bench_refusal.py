"""What one 429 costs the service: refused by the HTTP protocol (the door) or by the ASGI app.

Runs the real app (with a batcher stand-in that refuses every embedding request) under uvicorn in a child
process twice, once with the service's protocol and once with uvicorn's plain one (the refusal then comes
from ShedMiddleware inside the app), and sends the same pipelined refusals to each, repetitions alternating.
Prints the server process's CPU time per refusal and the ratio. `make bench-refusal`.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUEST = (
    b"POST /v1/embeddings HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
    b'Content-Length: 17\r\n\r\n{"input": "text"}'
)

SERVER = r"""
import sys, uvicorn
from service.app import create_app
from service.batch_errors import Overloaded
from service.cli import uvicorn_config
from service.settings import ServiceSettings

class Refusing:
    def check_admission(self, n_inputs, deadline_ms, ahead_inputs=0):
        raise Overloaded(3.0, 2.5)
    def estimated_wait_s(self, extra_inputs=0):
        return 3.0

settings = ServiceSettings(port=int(sys.argv[1]), log_level="warning")
app = create_app(settings)
app.state.service.batcher = Refusing()
app.state.service.ready = True
config = uvicorn_config(settings, app)
config.lifespan = "off"
if sys.argv[2] == "asgi":
    config.http = "httptools"
uvicorn.Server(config).run()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(mode: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), mode], cwd=REPO_ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the {mode} server did not start on port {port}")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def refuse(port: int, connections: int, per_connection: int) -> int:
    """Pipelined refusals on several connections; returns how many 429s came back."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    for sock in socks:
        sock.sendall(REQUEST * per_connection)
    refused = 0
    for sock in socks:
        sock.settimeout(30)
        data = b""
        while data.count(b"HTTP/1.1 ") < per_connection or not data.endswith(b"}"):
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        refused += data.count(b"HTTP/1.1 429 ")
        sock.close()
    return refused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--per-connection", type=int, default=200)
    args = parser.parse_args(argv)
    servers = {mode: start(mode) for mode in ("door", "asgi")}
    per_refusal_us: dict[str, list[float]] = {mode: [] for mode in servers}
    try:
        for _proc, port in servers.values():
            refuse(port, 4, 50)  # warm-up
        for _ in range(args.repetitions):
            for mode, (proc, port) in servers.items():
                before = cpu_s(proc.pid)
                refused = refuse(port, args.connections, args.per_connection)
                expected = args.connections * args.per_connection
                if refused != expected:
                    raise SystemExit(f"{mode}: {refused} of {expected} requests got 429")
                per_refusal_us[mode].append((cpu_s(proc.pid) - before) / refused * 1e6)
    finally:
        for proc, _port in servers.values():
            proc.terminate()
            proc.wait(timeout=20)
    total = args.connections * args.per_connection
    print(f"{args.repetitions} repetitions x {total} pipelined refusals on {args.connections} connections")
    for mode, label in (("door", "refused by the HTTP protocol"), ("asgi", "refused by the ASGI app")):
        values = per_refusal_us[mode]
        print(
            f"{label}: server CPU {statistics.median(values):.1f} us per 429 (runs: "
            + ", ".join(f"{v:.1f}" for v in values)
            + ")"
        )
    ratio = statistics.median(per_refusal_us["asgi"]) / statistics.median(per_refusal_us["door"])
    print(f"the protocol's refusal costs 1/{ratio:.1f} of the app's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

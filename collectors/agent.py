"""`embedperf agent`: sample this (service) host with the collector sources and serve the samples.

The load generator usually runs on another machine, where npu-smi and NVML do not exist. The agent
runs on the service host, samples at 1 Hz with the same sources as `python -m collectors`, keeps a
bounded ring buffer and serves it twice: `/metrics` (Prometheus text, one gauge per canonical
metric with `device`, `host` and `source` labels, so an existing Prometheus can scrape it) and
`/samples?since=UNIX_S` (JSON), which a run pulls so that no second is lost when one pull is late.
`/time` answers the agent's clock for the run's offset estimate.

Bound to anything but loopback, it requires a token (`Authorization: Bearer TOKEN`), read from
`--token-file` or EMBEDPERF_AGENT_TOKEN (collectors.agent_token); an empty token counts as none.
"""

from __future__ import annotations

import argparse
import collections
import hmac
import ipaddress
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from collectors.agent_metrics import metrics_text
from collectors.agent_token import TOKEN_ENV, resolve_token
from collectors.base import Source, begin_source, not_running, start_source_threads, tick_rows
from collectors.cli import build_sources, collector_config
from embedperf.errors import ConfigError
from embedperf.schema import TelemetrySample

DEFAULT_PORT = 9187
DEFAULT_BUFFER_S = 3600.0
MAX_BUFFER_ROWS = 2_000_000
AGENT_SOURCES: dict[str, str] = {"npu_smi": "npu_smi", "nvml": "nvml", "host": "psutil", "psutil": "psutil"}


class SampleBuffer:
    """The last `keep_s` seconds of samples (at most MAX_BUFFER_ROWS), safe across threads."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self._rows: collections.deque[TelemetrySample] = collections.deque(maxlen=MAX_BUFFER_ROWS)
        self._latest: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()

    def add(self, rows: list[TelemetrySample]) -> None:
        with self._lock:
            self._rows.extend(rows)
            for row in rows:
                self._latest[(row.source, row.device, row.metric)] = row.value
            horizon = (rows[-1].ts_unix_s if rows else 0.0) - self.keep_s
            while self._rows and self._rows[0].ts_unix_s < horizon:
                self._rows.popleft()

    def since(self, since_unix_s: float) -> list[TelemetrySample]:
        with self._lock:
            return [r for r in self._rows if r.ts_unix_s > since_unix_s]

    def oldest_unix_s(self) -> float | None:
        with self._lock:
            return self._rows[0].ts_unix_s if self._rows else None

    def latest(self) -> dict[tuple[str, str, str], float]:
        with self._lock:
            return dict(self._latest)


class Agent:
    """Source threads feeding the buffer; `clock_skew_s` shifts this agent's clock (tests of offset handling)."""

    def __init__(
        self,
        sources: list[Source],
        host_label: str,
        interval_s: float,
        buffer_s: float,
        clock_skew_s: float = 0.0,
    ) -> None:
        self.sources = sources
        self.host_label = host_label
        self.interval_s = interval_s
        self.buffer = SampleBuffer(buffer_s)
        self.clock_skew_s = clock_skew_s
        self.stop_event = threading.Event()
        self._threads: dict[Source, threading.Thread] = {}

    def now(self) -> float:
        return time.time() + self.clock_skew_s

    def start(self) -> None:
        self._threads = start_source_threads(self.sources, self._run, "agent")

    def _run(self, source: Source) -> None:
        if not begin_source(source):
            return
        try:
            for rows in tick_rows(source, self.interval_s, self.stop_event, self.host_label, wall=self.now):
                source.status.add_samples(len(rows))
                self.buffer.add(rows)
        finally:
            source.close()

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self._threads.values():
            thread.join(timeout=5.0)


def make_handler(agent: Agent, token: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            return

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if token is not None:
                scheme, _, given = self.headers.get("Authorization", "").partition(" ")
                # the scheme is case-insensitive (RFC 9110), as the reference service takes it
                valid = hmac.compare_digest(given.strip().encode(), token.encode())
                if not (valid and scheme.lower() == "bearer"):
                    self._send(401, b'{"error":"pass the agent token as Authorization: Bearer TOKEN"}')
                    return
            url = urlsplit(self.path)
            if url.path == "/metrics":
                text = metrics_text(agent.host_label, agent.buffer.latest(), agent.sources)
                self._send(200, text, CONTENT_TYPE_LATEST)
            elif url.path == "/time":
                self._send(200, json.dumps({"now_unix_s": agent.now(), "host": agent.host_label}).encode())
            elif url.path == "/samples":
                try:
                    since = float(parse_qs(url.query).get("since", ["0"])[0])
                except ValueError:
                    self._send(400, b'{"error":"since must be a unix time in seconds"}')
                    return
                rows = agent.buffer.since(since)
                body = {
                    "host": agent.host_label,
                    "now_unix_s": agent.now(),
                    "oldest_unix_s": agent.buffer.oldest_unix_s(),
                    "columns": ["ts_unix_s", "source", "device", "metric", "value"],
                    "samples": [[r.ts_unix_s, r.source, r.device, r.metric, r.value] for r in rows],
                    "sources": [s.status.snapshot().model_dump() for s in agent.sources],
                }
                self._send(200, json.dumps(body).encode())
            else:
                self._send(404, b'{"error":"endpoints: /metrics, /samples?since=UNIX_S, /time"}')

    return Handler


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="embedperf agent",
        description="Sample this host (npu-smi, NVML, host CPU) every second and serve the samples to "
        "`embedperf run --agent http://HOST:PORT` (JSON) and to Prometheus (/metrics).",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"listen port (default {DEFAULT_PORT}; 0: any)")
    p.add_argument(
        "--bind",
        default="127.0.0.1",
        help=f"listen address (default 127.0.0.1; another address needs a token: {TOKEN_ENV} or --token-file)",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help=f"file holding the token every request must carry as `Authorization: Bearer TOKEN` "
        f"(default: the environment variable {TOKEN_ENV}); an empty token counts as none",
    )
    p.add_argument(
        "--token",
        help=f"the token on the command line: accepted with a warning, since `ps` shows it to every user of "
        f"the host; prefer {TOKEN_ENV} or --token-file",
    )
    p.add_argument(
        "--sources", default="npu_smi,nvml,host", help="comma list of npu_smi, nvml, host (default all three)"
    )
    p.add_argument("--interval", type=float, default=1.0, help="sampling interval in seconds (default 1)")
    p.add_argument("--buffer-s", type=float, default=DEFAULT_BUFFER_S, help="seconds of samples kept (default 3600)")
    p.add_argument("--npu-smi", metavar="PATH", help="npu-smi executable (env EMBEDPERF_NPU_SMI)")
    p.add_argument("--npu-ids", help="only these NPU IDs, e.g. 4,5")
    p.add_argument("--host-label", help="host name in the samples (default: this hostname)")
    p.add_argument(
        "--clock-skew-s",
        type=float,
        default=0.0,
        help="shift this agent's clock by S seconds (to test offset handling)",
    )
    return p


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def build_agent(args: argparse.Namespace) -> Agent:
    names = [n.strip() for n in args.sources.split(",") if n.strip()]
    unknown = [n for n in names if n not in AGENT_SOURCES]
    if unknown or not names:
        raise ConfigError(f"unknown agent source(s) {unknown or names}; valid: npu_smi, nvml, host")
    sources = ",".join(sorted({AGENT_SOURCES[n] for n in names}))
    devices = {key: getattr(args, key) for key in ("npu_smi", "npu_ids", "host_label")}
    # out_dir is never written: the agent keeps its samples in memory
    values = {"out_dir": Path("."), "interval_s": args.interval, "sources": sources, "local_devices": True}
    config = collector_config({**values, **devices})
    return Agent(build_sources(config), config.host_label, args.interval, args.buffer_s, args.clock_skew_s)


def agent_token(args: argparse.Namespace) -> str | None:
    """The token from --token-file, --token or EMBEDPERF_AGENT_TOKEN; None when there is none or it is empty."""
    if args.token_file is not None and args.token is not None:
        raise ConfigError("give the token once: --token-file PATH or EMBEDPERF_AGENT_TOKEN, not also --token")
    if args.token is not None:
        return str(args.token).strip() or None
    return resolve_token(args.token_file)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    token = agent_token(args)
    if token is None and not _is_loopback(args.bind):
        raise ConfigError(
            f"--bind {args.bind} would serve telemetry to the network without authentication (no token, or "
            f"an empty one); set {TOKEN_ENV}=TOKEN or pass --token-file PATH with a non-empty token, "
            "or bind 127.0.0.1"
        )
    agent = build_agent(args)
    server = ThreadingHTTPServer((args.bind, args.port), make_handler(agent, token))
    agent.start()
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    thread = threading.Thread(target=server.serve_forever, name="agent-http", daemon=True)
    thread.start()
    host, port = str(server.server_address[0]), int(server.server_address[1])
    skipped = not_running(agent.sources)
    print(
        f"agent: serving {agent.host_label} on http://{host}:{port} (/metrics, /samples, /time; "
        f"{'a token is required' if token else 'no token: loopback only'})",
        flush=True,
    )
    if skipped:
        print(f"agent: not sampled: {skipped}", flush=True)
    if args.token is not None:  # after the first line, which scripts read for the URL
        print(
            f"agent: warning: --token is visible to every user of this host (ps, /proc/PID/cmdline); "
            f"set {TOKEN_ENV} or pass --token-file PATH instead",
            file=sys.stderr,
            flush=True,
        )
    stop.wait()
    server.shutdown()
    agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

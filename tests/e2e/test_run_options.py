"""`locust -f ...` and `embedperf run` take the same options and say what went wrong in one line.

Against a target that insists on an API key: `--api-key` reaches every request (pre-flight included)
from both commands, `--step-duration-s`/`--warmup-s` shape the steps, `embedperf run` prints its
run folder once; a warm-up as long as the step and a target answering an HTML page are one line each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from embedperf.schema import RunFolder, read_manifest, read_requests_table

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]
LOCUST = [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "locustfiles" / "ramp.py")]
KEY = "sekret-key"
KEY_ENV = "EMBEDPERF_TARGET_API_KEY"
TIMEOUT_S = 120  # a guard against a hang, not a performance bound
PROXY_PAGE = b"""<!DOCTYPE html>
<html>
<head>
  <title>502 Bad Gateway</title>
</head>
<body>
  <center><h1>502 Bad Gateway</h1></center>
  <hr><center>nginx</center>
</body>
</html>
"""


class _KeyedEmbeddings(BaseHTTPRequestHandler):
    """An embeddings target that answers 401 without `Bearer KEY` (or a fixed page, when `page` is set)."""

    protocol_version = "HTTP/1.1"
    seen: list[str | None]
    page: tuple[int, str, bytes] | None = None

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        auth = self.headers.get("Authorization")
        type(self).seen.append(auth)
        if self.page is not None:
            self._answer(*self.page)
        elif auth != f"Bearer {KEY}":
            self._answer(401, "application/json", b'{"error": "missing or wrong API key"}')
        else:
            inputs = json.loads(body).get("input")
            n = len(inputs) if isinstance(inputs, list) else 1
            data = [{"object": "embedding", "index": i, "embedding": [0.6, 0.8]} for i in range(n)]
            answer = {"object": "list", "data": data, "usage": {"prompt_tokens": n, "total_tokens": n}}
            self._answer(200, "application/json", json.dumps(answer).encode())

    def do_GET(self) -> None:  # noqa: N802 - no /info: a target that has none
        self._answer(404, "application/json", b'{"detail": "Not Found"}')

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hangs up mid-answer (Locust stopping its users) is no test failure."""


@pytest.fixture
def target() -> Iterator[object]:
    servers: list[_QuietServer] = []

    def start(page: tuple[int, str, bytes] | None = None) -> tuple[str, list[str | None]]:
        seen: list[str | None] = []
        handler = type("Handler", (_KeyedEmbeddings,), {"seen": seen, "page": page})
        server = _QuietServer(("127.0.0.1", 0), handler)
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()  # quick shutdown()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV} | {"PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False
    )


def assert_shaped_run(folder: RunFolder, seen: list[str | None]) -> None:
    """Every request carried the key; every step lasted 1.5 s with 0.5 s trimmed."""
    assert seen and set(seen) == {f"Bearer {KEY}"}
    manifest = read_manifest(folder)
    assert [(s.duration_s, s.warmup_s) for s in manifest.scenario.steps] == [(1.5, 0.5)] * 2
    assert [s.warmup_s for s in manifest.stages] == [0.5, 0.5]
    rows = read_requests_table(folder).to_pylist()
    assert len(rows) > 20 and all(r["ok"] for r in rows), {r["error"] for r in rows}


SHAPE = ["--api-key", KEY, "--step-duration-s", "1.5", "--warmup-s", "0.5", "--no-collectors"]


def test_locust_takes_api_key_and_the_step_options(target, tmp_path: Path) -> None:
    url, seen = target()
    proc = run([*LOCUST, "--headless", "--only-summary", "--scenario", "smoke", "--host", url,
                "--runs-dir", str(tmp_path), *SHAPE])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "unrecognized arguments" not in proc.stderr
    folders = [
        line.removeprefix("run folder: ")
        for line in proc.stdout.splitlines()
        if line.startswith("run folder: ")
    ]
    assert len(folders) == 1
    assert_shaped_run(RunFolder(Path(folders[0])), seen)


def test_embedperf_run_takes_the_same_options_and_prints_its_folder_once(target, tmp_path: Path) -> None:
    url, seen = target()
    proc = run([*EMBEDPERF, "run", "--scenario", "smoke", "--host", url, "--runs-dir", str(tmp_path), *SHAPE])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    everything = (proc.stdout + proc.stderr).splitlines()
    folder_lines = [line for line in everything if "run folder:" in line]
    assert folder_lines == [proc.stdout.strip().splitlines()[-1]], folder_lines
    assert_shaped_run(RunFolder(Path(folder_lines[0].removeprefix("run folder: "))), seen)


def test_a_wrong_key_is_refused_before_any_load(target, tmp_path: Path) -> None:
    url, seen = target()
    proc = run([*EMBEDPERF, "run", "smoke", "--host", url, "--runs-dir", str(tmp_path), "--api-key", "wrong"])
    assert proc.returncode == 2
    assert "refused the API key (HTTP 401" in proc.stderr and "--api-key" in proc.stderr
    assert seen == ["Bearer wrong"] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command", [[*EMBEDPERF, "run", "smoke"], [*LOCUST, "--headless", "--scenario", "smoke"]]
)
def test_a_warmup_as_long_as_the_step_is_one_line_naming_the_field_and_the_flag(
    command, tmp_path: Path
) -> None:
    proc = run([*command, "--warmup-s", "5", "--host", "http://127.0.0.1:9", "--runs-dir", str(tmp_path)])
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, proc.stderr
    assert "steps.warmup_s (5 s) must be shorter than steps.duration_s (3 s)" in errors[0]
    assert "--warmup-s" in errors[0] and "--step-duration-s" in errors[0]
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_an_html_answer_is_cut_to_one_line(target, tmp_path: Path) -> None:
    url, _ = target(page=(502, "text/html; charset=utf-8", PROXY_PAGE))
    proc = run([*EMBEDPERF, "run", "smoke", "--host", url, "--runs-dir", str(tmp_path)])
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "answered HTTP 502" in lines[0] and "text/html, page title '502 Bad Gateway'" in lines[0]
    assert "<" not in lines[0]

"""LeanCookieJar: cookies a target sets still come back (sticky sessions); without cookies nothing runs.

The client side runs in a subprocess: importing Locust monkey-patches the process it runs in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]

CLIENT = """
import http.cookiejar, json, sys
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment
from loadgen.traffic.cookies import LeanCookieJar, install_lean_cookie_jar

calls = []
add, extract = http.cookiejar.CookieJar.add_cookie_header, http.cookiejar.CookieJar.extract_cookies
http.cookiejar.CookieJar.add_cookie_header = lambda self, r: (calls.append("add"), add(self, r))[1]
http.cookiejar.CookieJar.extract_cookies = lambda self, a, r: (calls.append("extract"), extract(self, a, r))[1]
session = FastHttpSession(sys.argv[1], Environment().events.request, user=None)
jar = install_lean_cookie_jar(session)
statuses = [session.get("/x").status_code for _ in range(3)]
print(json.dumps({"statuses": statuses, "calls": calls, "cookies": [c.name for c in jar],
                  "lean": isinstance(session.client.cookiejar, LeanCookieJar)}))
"""


@contextmanager
def cookie_server(set_cookie: str | None) -> Iterator[tuple[str, list[str | None]]]:
    """Answers 200; sets `set_cookie` on the first answer; records each request's Cookie header."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            seen.append(self.headers.get("Cookie"))
            self.send_response(200)
            if set_cookie and len(seen) == 1:
                self.send_header("Set-Cookie", set_cookie)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def run_client(url: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, url], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow  # a Python process that imports Locust
def test_a_cookie_the_target_sets_is_sent_back() -> None:
    with cookie_server("lb=replica-2; Path=/") as (url, seen):
        result = run_client(url)
    assert result["statuses"] == [200, 200, 200] and result["lean"]
    assert seen == [None, "lb=replica-2", "lb=replica-2"]
    assert result["cookies"] == ["lb"]
    assert result["calls"] == ["extract", "add", "add"]  # later answers set no cookie: nothing to read


@pytest.mark.slow  # a Python process that imports Locust
def test_without_cookies_the_jar_does_no_work() -> None:
    with cookie_server(None) as (url, seen):
        result = run_client(url)
    assert result["statuses"] == [200, 200, 200] and result["lean"]
    assert seen == [None, None, None]
    assert result["calls"] == [] and result["cookies"] == []

"""Pre-flight: normalise the target URL and send one real embeddings request before any load.

A run against a wrong URL, a dead port or a refused key used to spend its whole duration
recording failures (and a trailing slash produced `//v1/embeddings`); one request first turns
each of those into one line and exit code 2, with nothing measured.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from embedperf.errors import TargetError
from loadgen.traffic.context import build_context, request_headers
from loadgen.traffic.exchange import check_body
from scenarios.models import Scenario

PREFLIGHT_TEXT = "embedperf pre-flight check"
RETRY_STATUSES = frozenset({429, 502, 503, 504})  # busy, not wrong: worth a second try
RETRIES = 3
RETRY_WAIT_S = 1.0
BODY_EXCERPT_CHARS = 120  # of an unexpected answer, whitespace collapsed: the error stays one line
_HTML_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def normalise_base_url(url: str, path: str = "/v1/embeddings") -> str:
    """The base URL the load uses: no trailing slash, and an OpenAI-style `/v1` base accepted.

    The openai client posts to base_url + "/embeddings" with base_url ending in /v1; the scenario's
    path already starts with /v1, so that suffix is dropped from the base instead of doubled.
    """
    text = url.strip()
    if "://" not in text:
        raise TargetError(f"target URL {text!r} has no scheme; use http://{text} (or https://{text})")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise TargetError(
            f"target URL {text!r}: scheme {parts.scheme!r} is not supported; use http:// or https://"
        )
    if not parts.hostname:
        raise TargetError(f"target URL {text!r} has no host; use http://HOST:PORT")
    if parts.query or parts.fragment:
        raise TargetError(f"target URL {text!r}: drop the query/fragment; give the service's base URL")
    try:
        parts.port  # noqa: B018 - validates the port number
    except ValueError as exc:
        raise TargetError(f"target URL {text!r}: {exc}") from None
    prefix = parts.path.rstrip("/")
    api_dir = path.rsplit("/", 1)[0] if path.count("/") > 1 else ""
    if api_dir and prefix.endswith(api_dir):
        prefix = prefix[: -len(api_dir)]
    return f"{parts.scheme}://{parts.netloc}{prefix}"


def check_target(scenario: Scenario, host: str) -> str:
    """Normalise host, send one embeddings request and return the base URL to load.

    Raises TargetError (exit 2) with one line when the target is unreachable, refuses the API key,
    has no such path or answers something that is not an embeddings response.
    """
    base = normalise_base_url(host, scenario.target.path)
    url = base + scenario.target.path
    status, content_type, body = _post_once(scenario, url)
    if status == 200:
        ctx = build_context(scenario, base, _discard, "preflight", None)
        ctx.expected_dim = None  # shape only: the run measures (and records) a wrong dimension
        reason, _ = check_body(body, ctx, 1)
        if reason:
            raise TargetError(
                f"{url} answered 200 but not with embeddings ({reason}): {answer_excerpt(body, content_type)}; "
                "is --host an OpenAI-compatible embeddings service?"
            )
        return base
    raise TargetError(_status_message(scenario, url, status, content_type, body))


def answer_excerpt(body: bytes, content_type: str) -> str:
    """An unexpected answer in one line: its content type, then an HTML page's title or the first
    BODY_EXCERPT_CHARS characters with whitespace collapsed (a proxy's error page is many lines)."""
    kind = content_type.split(";", 1)[0].strip() or "no content type"
    title = _HTML_TITLE.search(body) if "html" in kind or body.lstrip()[:1] == b"<" else None
    raw = title.group(1) if title else body
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    if len(text) > BODY_EXCERPT_CHARS:
        text = text[:BODY_EXCERPT_CHARS] + "…"
    if title:
        return f"{kind}, page title {text!r}"
    return f"{kind}: {text}" if text else f"{kind}, empty body"


def _discard(_: list[Any]) -> None:
    """The pre-flight request is not a measurement: its row goes nowhere."""


def _post_once(scenario: Scenario, url: str) -> tuple[int, str, bytes]:
    """(status, content type, body) of one embeddings request, retried while the target says busy."""
    target = scenario.target
    payload = {"input": [PREFLIGHT_TEXT], "model": target.model, "encoding_format": target.encoding_format}
    data = json.dumps(payload).encode()
    status, content_type, body = 0, "", b""
    for attempt in range(RETRIES):
        request = urllib.request.Request(url, data=data, headers=request_headers(scenario), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=target.timeout_s) as resp:  # noqa: S310 - user-given target
                return int(resp.status), resp.headers.get("Content-Type", ""), resp.read()
        except urllib.error.HTTPError as exc:
            content_type = exc.headers.get("Content-Type", "") if exc.headers else ""
            status, body = exc.code, exc.read() or b""
        except urllib.error.URLError as exc:
            raise TargetError(_unreachable(url, exc.reason, target.timeout_s)) from None
        except (TimeoutError, OSError) as exc:
            raise TargetError(_unreachable(url, exc, target.timeout_s)) from None
        if status not in RETRY_STATUSES or attempt == RETRIES - 1:
            break
        time.sleep(RETRY_WAIT_S)
    return status, content_type, body


def _unreachable(url: str, reason: object, timeout_s: float) -> str:
    if isinstance(reason, ConnectionRefusedError):
        why = "connection refused"
    elif isinstance(reason, TimeoutError):
        why = f"no answer within {timeout_s:g} s (target.timeout_s)"
    else:
        why = str(reason)
    return (
        f"cannot reach the target at {url}: {why}; is the service running and listening there? "
        "(start the reference service with `embedperf serve`, or pass --host)"
    )


def _status_message(scenario: Scenario, url: str, status: int, content_type: str, body: bytes) -> str:
    env = scenario.target.api_key_env
    if status in (401, 403):
        return f"the target refused the API key (HTTP {status} from {url}); pass --api-key KEY or set {env}"
    if status == 404:
        return (
            f"POST {url} answered 404 Not Found: wrong path; pass the service's base URL as --host "
            "(http://HOST:PORT, or an OpenAI base URL ending in /v1) or set target.path"
        )
    return (
        f"POST {url} answered HTTP {status} to one embeddings request ({answer_excerpt(body, content_type)})"
    )


def target_for_locust(scenario: Scenario, host: str, check: bool) -> str:
    """The Locust plugin's entry: the normalised host, checked with one request when `check`."""
    return check_target(scenario, host) if check else normalise_base_url(host, scenario.target.path)

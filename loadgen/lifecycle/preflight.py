"""Pre-flight: normalise the target URL, resolve its protocol, path and model, and send one real request
before any load, so a wrong URL, a dead port or a refused key is one line and exit 2 with nothing measured,
not a whole run of failures. A 404 that names the model is told apart from a wrong path."""

from __future__ import annotations

import dataclasses
import re
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from collectors.agent_pull import check_agent, refused_message
from collectors.agent_token import resolve_token
from embedperf.errors import TargetError
from loadgen.lifecycle.target_detection import Prober, ResolvedTarget, resolve_target, unreachable
from loadgen.traffic.context import request_headers
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols import registry
from scenarios.models import Scenario, Task

PREFLIGHT_TEXT = "embedperf pre-flight check"
PREFLIGHT_DOCUMENTS = ["a pre-flight document", "another pre-flight document"]
ANSWER_OF = {"embed": "embeddings", "embed_sparse": "sparse embeddings", "rerank": "a ranking"}
RETRY_STATUSES = frozenset({429, 502, 503, 504})  # busy, not wrong: worth a second try
RETRIES = 3
RETRY_WAIT_S = 1.0
BODY_EXCERPT_CHARS = 120  # of an unexpected answer, whitespace collapsed: the error stays one line
_HTML_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def normalise_base_url(url: str, path: str = "/v1/embeddings") -> str:
    """The base URL the load uses: no trailing slash, and an OpenAI-style base ending in the path's API
    directory (`/v1`) accepted, that directory dropped instead of doubled."""
    text = url.strip()
    if "://" not in text:
        raise TargetError(f"target URL {text!r} has no scheme; use http://{text} (or https://{text})")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise TargetError(f"target URL {text!r}: scheme {parts.scheme!r} is not supported; use http:// or https://")
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


def check_target(scenario: Scenario, host: str) -> ResolvedTarget:
    """Resolve what the scenario left unset and send one request; the target to load, or a one-line
    TargetError (exit 2): unreachable, key refused, no such path or model, or not the task's answer."""
    base = normalise_base_url(host, scenario.target.path)
    prober = Prober(base, request_headers(scenario))
    resolved = resolve_target(scenario, prober)
    target, protocol, task = resolved.target, resolved.protocol, scenario.payload.task
    base = normalise_base_url(base, target.path)
    url = base + target.path
    payload = preflight_payload(task, target.path)
    data = protocol.request_body(payload, task, target).encode()
    status, content_type, body = _post_once(scenario, url, data)
    if status == 200:
        reason, _ = protocol.check_answer(body, payload, task, target, _ShapeOnly())
        if reason:
            raise TargetError(
                f"{url} answered 200 but not with {ANSWER_OF[task]} ({reason}): {answer_excerpt(body, content_type)}; "
                f"is --host a {protocol.label} target? (--protocol chooses another)"
            )
        return dataclasses.replace(resolved, base_url=base)
    if protocol.model_not_found(status, body) and not resolved.served_models:  # the model list says which
        served = tuple(protocol.served_models(prober, resolved.prefix))
        resolved = dataclasses.replace(resolved, served_models=served)
    raise TargetError(_status_message(scenario, resolved, url, status, content_type, body))


def preflight_payload(task: Task, path: str) -> RequestPayload:
    """The one request of the pre-flight check: a text, or a query and two documents to rank."""
    if task == "rerank":
        return RequestPayload(list(PREFLIGHT_DOCUMENTS), path, query=PREFLIGHT_TEXT)
    return RequestPayload([PREFLIGHT_TEXT], path)


class _ShapeOnly:
    """The pre-flight checks an answer's shape only: the run measures (and records) a wrong dimension."""

    expected_dim: int | None = None
    dim_source = ""

    def learn_dim(self, dim: int) -> None:
        """Nothing to learn: the run's own context learns from its first answer."""


def answer_excerpt(body: bytes, content_type: str) -> str:
    """An unexpected answer in one line: its content type, then an HTML title or its first characters."""
    kind = content_type.split(";", 1)[0].strip() or "no content type"
    title = _HTML_TITLE.search(body) if "html" in kind or body.lstrip()[:1] == b"<" else None
    raw = title.group(1) if title else body
    text = " ".join(raw.decode("utf-8", errors="replace").split())
    if len(text) > BODY_EXCERPT_CHARS:
        text = text[:BODY_EXCERPT_CHARS] + "…"
    if title:
        return f"{kind}, page title {text!r}"
    return f"{kind}: {text}" if text else f"{kind}, empty body"


def _post_once(scenario: Scenario, url: str, data: bytes) -> tuple[int, str, bytes]:
    """(status, content type, body) of one request, retried while the target says busy."""
    target = scenario.target
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
            raise TargetError(unreachable(url, exc.reason, target.timeout_s)) from None
        except (TimeoutError, OSError) as exc:
            raise TargetError(unreachable(url, exc, target.timeout_s)) from None
        if status not in RETRY_STATUSES or attempt == RETRIES - 1:
            break
        time.sleep(RETRY_WAIT_S)
    return status, content_type, body


def _status_message(
    scenario: Scenario, resolved: ResolvedTarget, url: str, status: int, content_type: str, body: bytes
) -> str:
    env = scenario.target.api_key_env
    protocol, model = resolved.protocol, resolved.target.model
    if status in (401, 403) and "Authorization" not in request_headers(scenario):
        return f"the target needs an API key (HTTP {status} from {url}) and none was sent: pass --api-key KEY or set {env}"
    if status in (401, 403):
        return f"the target refused the API key (HTTP {status} from {url}); pass --api-key KEY or set {env}"
    if protocol.model_not_found(status, body):
        served = [m for m in resolved.served_models if m != model]
        if served:
            return (
                f"model {model} is not served here; it serves: {', '.join(served)} (HTTP {status} from {url}); "
                "pass --model with one of them, or leave --model and target.model unset to use the first"
            )
        return (
            f"model {model} is not served here (HTTP {status} from {url}: {answer_excerpt(body, content_type)}); "
            "pass --model with a model the target serves"
        )
    if status == 404:
        return (
            f"POST {url} answered 404 Not Found: wrong path for protocol {protocol.name}; pass the service's base "
            "URL as --host (http://HOST:PORT, or an OpenAI base URL ending in /v1), set target.path, or choose "
            f"the protocol with --protocol ({', '.join(registry.REGISTRY.names())})"
        )
    return f"POST {url} answered HTTP {status} to one request ({answer_excerpt(body, content_type)})"


def target_for_locust(scenario: Scenario, host: str, check: bool) -> ResolvedTarget:
    """The plugin's entry: the target checked with one request when `check`, else defaulted."""
    if check:
        return check_target(scenario, host)
    target = registry.default_target(scenario.target, scenario.payload.task)
    protocol = registry.get(target.protocol)
    return ResolvedTarget(target, protocol, base_url=normalise_base_url(host, target.path))


def check_agents(agents: Sequence[str], token_file: str | None) -> None:
    """`--agent`'s pre-flight: a TargetError naming every agent whose /time refuses the run's token (401), a
    wrong secret the run would otherwise pull nothing with. A silent agent is left to the run: it may still
    come up."""
    if not agents:
        return
    token = resolve_token(Path(token_file) if token_file else None)
    refused = [reason for url in agents if (reason := check_agent(url, token)) == refused_message(url)]
    if refused:
        raise TargetError("; ".join(refused))

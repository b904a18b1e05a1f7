"""One timed embeddings request: send, validate the answer, report to Locust and record one row."""

from __future__ import annotations

import base64
import json
import re
import time
from typing import TYPE_CHECKING, Any

from gevent import Timeout as GeventTimeout

from embedperf.schema import REQUEST_COLUMNS, REQUEST_ID_HEADER, SERVED_MODEL_HEADER
from loadgen.traffic.context import RunContext
from loadgen.traffic.headers import TIMING_VALUE_COLUMNS, raw_timing_values
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.quality import answer_cosine

if TYPE_CHECKING:  # importing locust monkey-patches the process; only its users need that
    from locust.contrib.fasthttp import FastHttpSession

_COL = {name: i for i, name in enumerate(REQUEST_COLUMNS)}
_NO_TIMING: list[Any] = [None] * len(TIMING_VALUE_COLUMNS)
_HEADERS_ATTR = "_embedperf_headers"  # the request headers, cached on each FastHttpSession
_EMBEDDING_LIST = re.compile(rb'"embedding"\s*:\s*\[')  # `"object": "embedding"` does not match
_PROMPT_TOKENS = re.compile(rb'"prompt_tokens"\s*:\s*(\d+)\s*[,}]')


def new_row_values() -> list[Any]:
    return [None] * len(REQUEST_COLUMNS)


def _embedding_dim(item: Any, encoding_format: str) -> int | None:
    emb = item.get("embedding") if isinstance(item, dict) else None
    if isinstance(emb, list):
        return len(emb)
    if isinstance(emb, str) and encoding_format == "base64":
        return len(base64.b64decode(emb)) // 4
    return None


def _count_float_lists(body: bytes, dim: int) -> int:
    """How many `"embedding": [...]` lists the body holds, when every one has `dim` items; else -1.

    A byte scan instead of parsing every float: -1 also when the body does not look like a
    plain JSON object of flat lists (then the caller parses it properly). Runs once per
    request, so it stays in C calls: one regex search per list, no copies of the body.
    """
    if body[:1] != b"{" or body[-1:] != b"}":
        stripped = body.strip()
        if not (stripped.startswith(b"{") and stripped.endswith(b"}")):
            return -1
    if b'"data"' not in body:
        return -1
    search = _EMBEDDING_LIST.search
    find = body.find
    count = 0
    pos = 0
    while (match := search(body, pos)) is not None:
        start = match.end()
        end = find(b"]", start)
        if end < 0 or find(b"[", start, end) >= 0:
            return -1
        items = body.count(b",", start, end) + 1
        if items == 1 and not body[start:end].strip():
            items = 0
        if items != dim:
            return -1
        count += 1
        pos = end + 1
    return count


def check_body(body: bytes, ctx: RunContext, n_inputs: int) -> tuple[str, int | None]:
    """'' when the answer carries n_inputs embeddings of the expected size, else the reason; plus usage tokens.

    Float answers are checked by a byte scan (count and length of the embedding lists) that
    costs a few microseconds where parsing every float costs ~100 us at 384 dimensions; any
    answer the scan does not accept outright is parsed with `json` for the exact reason.
    """
    expected_dim = ctx.expected_dim
    if (
        expected_dim is not None
        and ctx.scenario.target.encoding_format == "float"
        and _count_float_lists(body, expected_dim) == n_inputs
    ):
        at = body.rfind(b'"prompt_tokens"')  # usage comes last: look there first
        match = _PROMPT_TOKENS.match(body, at) if at >= 0 else None
        if match is None and at >= 0:
            match = _PROMPT_TOKENS.search(body)
        return "", int(match.group(1)) if match else None
    return _check_parsed(body, ctx, n_inputs)


def _check_parsed(body: bytes, ctx: RunContext, n_inputs: int) -> tuple[str, int | None]:
    try:
        doc = json.loads(body)
    except ValueError:
        return "invalid JSON in a 200 answer", None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return "answer has no `data` list", None
    usage = doc.get("usage") if isinstance(doc, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    tokens = tokens if isinstance(tokens, int) else None
    if len(data) != n_inputs:
        return f"wrong count: {len(data)} embeddings for {n_inputs} inputs", tokens
    enc = ctx.scenario.target.encoding_format
    dims = {_embedding_dim(item, enc) for item in data}
    if None in dims:
        return "answer item without an embedding", tokens
    if len(dims) != 1:
        return f"embeddings of different sizes {sorted(d for d in dims if d is not None)}", tokens
    dim = dims.pop()
    assert dim is not None
    if ctx.expected_dim is None:
        ctx.learn_dim(dim)
    elif dim != ctx.expected_dim:
        return f"wrong dimension: {dim}, expected {ctx.expected_dim} (from {ctx.dim_source})", tokens
    return "", tokens


def _request_headers(client: FastHttpSession, ctx: RunContext) -> dict[str, str]:
    """The headers Locust's FastHttpSession.request would send with a JSON body, built once per client."""
    headers = getattr(client, _HEADERS_ATTR, None)
    if headers is None:
        headers = {
            "Accept-Encoding": "gzip, deflate, br",
            "Content-Type": "application/json",
            "Accept": "application/json",
            **ctx.headers,
        }
        if client.auth_header and "Authorization" not in headers:
            headers["Authorization"] = client.auth_header
        setattr(client, _HEADERS_ATTR, headers)
    return headers


class RequestFailed(Exception):
    """A failed request as Locust's statistics see it; the message is the row's `error`."""


def send_embeddings(
    client: FastHttpSession,
    ctx: RunContext,
    payload: RequestPayload,
    t_intended_unix_s: float | None = None,
    stage: tuple[int, str, int | None, float | None] | None = None,
) -> list[Any]:
    """Post one request, report it to Locust as ok/failed, record its row and return the row values.

    The request goes through FastHttpSession's own send (connection errors become a response with
    status 0 and `.error`) and is reported with one `request` event, as `request(...,
    catch_response=True)` plus `success()`/`failure()` would, without building the context-manager
    copy of every response: this runs once per request and its CPU is the generator's budget.
    The row holds the raw `Server-Timing` and batch headers in the timing columns; the recorder
    parses them a batch at a time (headers.parse_raw_timing), off the request path. Every request
    carries its own `X-Request-ID` (ctx.request_ids); the row keeps it and the answer's
    `X-Served-Model` as sent, the body is never read for the model.
    """
    target = ctx.scenario.target
    url = f"{client.base_url}{target.path}"  # as FastHttpSession._build_url does for a relative path
    data = json.dumps(
        {"input": payload.inputs, "model": target.model, "encoding_format": target.encoding_format}
    )
    request_id = next(ctx.request_ids)
    headers = {**_request_headers(client, ctx), REQUEST_ID_HEADER: request_id}  # a copy: requests overlap
    t_sent = time.time()
    p_sent = time.perf_counter()
    resp = client._send_request_safe_mode("POST", url, payload=data, headers=headers)
    read_error: BaseException | None = None
    try:
        content = resp.content or b""
    except (Exception, GeventTimeout) as exc:  # a broken answer fails this request only, as Locust counts it
        read_error, content = exc, b""
    latency_ms = (time.perf_counter() - p_sent) * 1000.0
    status = int(resp.status_code or 0)
    conn_error = (
        read_error if read_error is not None else getattr(resp, "error", None) if not status else None
    )
    error = ""
    tokens: int | None = None
    if payload.expect_failure:
        if not 400 <= status < 500:
            error = f"expected a 4xx rejection, got {status or conn_error}"
    elif conn_error is not None:
        error = f"{type(conn_error).__name__}: {conn_error}"
    elif status == 200:
        error, tokens = check_body(content, ctx, len(payload.inputs))
    else:
        error = f"HTTP {status}" if status else "no answer"
    client.request_event.fire(
        request_type="POST",
        name=payload.endpoint,
        context={},
        response=resp,
        exception=RequestFailed(error) if error else None,
        start_time=t_sent,
        url=url,
        response_length=len(content),
        response_time=latency_ms,
    )
    headers_in = resp.headers
    t_intended = t_sent if t_intended_unix_s is None else t_intended_unix_s
    t_done = t_sent + latency_ms / 1000.0
    stage_values = stage if stage is not None else (None, None, None, None)
    inputs = payload.inputs
    row = [  # REQUEST_COLUMNS order (checked below), built in one go: this runs once per request
        None,  # run_id: set by the recorder
        ctx.worker,
        *stage_values,
        t_intended,
        t_sent,
        t_done,
        latency_ms,
        (t_done - t_intended) * 1000.0,
        payload.endpoint,
        status or None,
        not error,
        error or None,
        len(inputs),
        len(inputs[0]) if len(inputs) == 1 else sum(map(len, inputs)),
        tokens,
        len(content),
        *(raw_timing_values(headers_in.get) if headers_in is not None else _NO_TIMING),
        answer_cosine(content, payload.reference) if payload.reference is not None and not error else None,
        request_id,
        headers_in.get(SERVED_MODEL_HEADER) if headers_in is not None else None,  # raw; see recorder
    ]
    ctx.sink(row)
    return row


def dropped_row(
    ctx: RunContext,
    payload: RequestPayload,
    t_intended_unix_s: float,
    reason: str,
    stage: tuple[int, str, int | None, float | None] | None,
) -> list[Any]:
    """A request the open-loop scheduler could not start: recorded, never silently skipped."""
    row = new_row_values()
    row[_COL["worker"]] = ctx.worker
    if stage is not None:
        (
            row[_COL["stage_index"]],
            row[_COL["stage_label"]],
            row[_COL["target_users"]],
            row[_COL["target_rate"]],
        ) = stage
    row[_COL["t_intended_unix_s"]] = t_intended_unix_s
    row[_COL["endpoint"]] = payload.endpoint
    row[_COL["ok"]] = False
    row[_COL["error"]] = reason
    row[_COL["n_inputs"]] = len(payload.inputs)
    row[_COL["input_chars"]] = payload.input_chars
    ctx.sink(row)
    return row


assert REQUEST_COLUMNS[:2] == ("run_id", "worker") and REQUEST_COLUMNS[2:6] == (
    "stage_index",
    "stage_label",
    "target_users",
    "target_rate",
), "send_embeddings builds rows in REQUEST_COLUMNS order"
assert REQUEST_COLUMNS[6:19] == (
    "t_intended_unix_s",
    "t_sent_unix_s",
    "t_done_unix_s",
    "latency_ms",
    "latency_from_intended_ms",
    "endpoint",
    "status_code",
    "ok",
    "error",
    "n_inputs",
    "input_chars",
    "input_tokens",
    "response_bytes",
), "send_embeddings builds rows in REQUEST_COLUMNS order"
assert REQUEST_COLUMNS[19:] == (*TIMING_VALUE_COLUMNS, "probe_cosine", "request_id", "served_model"), (
    "send_embeddings builds rows in REQUEST_COLUMNS order"
)

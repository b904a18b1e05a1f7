"""One timed embeddings request: send, validate the answer, report to Locust and record one row."""

from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any

from embedperf.schema import REQUEST_COLUMNS
from loadgen.context import RunContext
from loadgen.headers import timing_columns
from loadgen.payloads import RequestPayload

if TYPE_CHECKING:  # importing locust monkey-patches the process; only its users need that
    from locust.contrib.fasthttp import FastHttpSession

_COL = {name: i for i, name in enumerate(REQUEST_COLUMNS)}


def new_row_values() -> list[Any]:
    return [None] * len(REQUEST_COLUMNS)


def _embedding_dim(item: Any, encoding_format: str) -> int | None:
    emb = item.get("embedding") if isinstance(item, dict) else None
    if isinstance(emb, list):
        return len(emb)
    if isinstance(emb, str) and encoding_format == "base64":
        return len(base64.b64decode(emb)) // 4
    return None


def check_body(body: bytes, ctx: RunContext, n_inputs: int) -> tuple[str, int | None]:
    """'' when the answer carries n_inputs embeddings of the expected size, else the reason; plus usage tokens."""
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


def send_embeddings(
    client: FastHttpSession,
    ctx: RunContext,
    payload: RequestPayload,
    t_intended_unix_s: float | None = None,
    stage: tuple[int, str, int | None, float | None] | None = None,
) -> list[Any]:
    """Post one request, mark it ok/failed in Locust, record its row and return the row values."""
    target = ctx.scenario.target
    body = {"input": payload.inputs, "model": target.model, "encoding_format": target.encoding_format}
    t_sent = time.time()
    p_sent = time.perf_counter()
    with client.post(
        target.path, json=body, headers=ctx.headers, name=payload.endpoint, catch_response=True
    ) as resp:
        latency_ms = (time.perf_counter() - p_sent) * 1000.0
        status = int(resp.status_code or 0)
        content = resp.content or b""
        error = ""
        tokens: int | None = None
        conn_error = getattr(resp, "error", None) if status == 0 else None
        if payload.expect_failure:
            if 400 <= status < 500:
                resp.success()
            else:
                error = f"expected a 4xx rejection, got {status or conn_error}"
                resp.failure(error)
        elif status == 200:
            error, tokens = check_body(content, ctx, len(payload.inputs))
            if error:
                resp.failure(error)
        else:
            error = f"{type(conn_error).__name__}: {conn_error}" if conn_error else f"HTTP {status}"
            resp.failure(error)
        headers = resp.headers
    row = new_row_values()
    t_intended = t_sent if t_intended_unix_s is None else t_intended_unix_s
    t_done = t_sent + latency_ms / 1000.0
    row[_COL["worker"]] = ctx.worker
    if stage is not None:
        (
            row[_COL["stage_index"]],
            row[_COL["stage_label"]],
            row[_COL["target_users"]],
            row[_COL["target_rate"]],
        ) = stage
    row[_COL["t_intended_unix_s"]] = t_intended
    row[_COL["t_sent_unix_s"]] = t_sent
    row[_COL["t_done_unix_s"]] = t_done
    row[_COL["latency_ms"]] = latency_ms
    row[_COL["latency_from_intended_ms"]] = (t_done - t_intended) * 1000.0
    row[_COL["endpoint"]] = payload.endpoint
    row[_COL["status_code"]] = status or None
    row[_COL["ok"]] = not error
    row[_COL["error"]] = error or None
    row[_COL["n_inputs"]] = len(payload.inputs)
    row[_COL["input_chars"]] = payload.input_chars
    row[_COL["input_tokens"]] = tokens
    row[_COL["response_bytes"]] = len(content)
    if headers:
        for name, value in timing_columns(headers.get).items():
            row[_COL[name]] = value
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

"""One timed request of the run's task: send it, validate the answer, report to Locust and record one row.

The target's protocol (loadgen.traffic.protocols, on the run context) builds the body and judges the answer;
this module times it, reports it and lays out the row."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gevent import GreenletExit
from gevent import Timeout as GeventTimeout

from embedperf.error_kinds import CUT_OFF_PREFIX
from embedperf.schema import REQUEST_ID_HEADER, SERVED_MODEL_HEADER, RequestRow
from loadgen.traffic.context import RunContext, Stage
from loadgen.traffic.headers import TIMING_VALUE_COLUMNS
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.quality import answer_cosine

if TYPE_CHECKING:  # importing locust monkey-patches the process; only its users need that
    from locust.contrib.fasthttp import FastHttpSession

_NO_TIMING: list[Any] = [None] * len(TIMING_VALUE_COLUMNS)
_HEADERS_ATTR = "_embedperf_headers"  # the request headers, cached on each FastHttpSession


def _request_headers(client: FastHttpSession, ctx: RunContext) -> dict[str, str]:
    """The headers Locust's FastHttpSession.request would send with a JSON body, built once per client."""
    headers = getattr(client, _HEADERS_ATTR, None)
    if headers is None:
        headers = {
            "Accept-Encoding": "gzip, deflate, br", "Content-Type": "application/json",
            "Accept": "application/json", **ctx.headers,
        }
        if client.auth_header and "Authorization" not in headers:
            headers["Authorization"] = client.auth_header
        setattr(client, _HEADERS_ATTR, headers)
    return headers


class RequestFailed(Exception):
    """A failed request as Locust's statistics see it; the message is the row's `error`."""


class NoAnswer:
    """A request that got no answer at all (refused, reset, timed out): status 0, no body, and why."""

    status_code = 0
    content = b""
    headers = None

    def __init__(self, error: BaseException) -> None:
        self.error = error


def post(client: FastHttpSession, url: str, data: str, headers: dict[str, str]) -> Any:
    """POST through the session's user agent (geventhttpclient's public `urlopen`), as Locust does: an answer
    outside 2xx/3xx comes back on its exception, no answer at all as a NoAnswer."""
    try:
        return client.client.urlopen(url, method="POST", payload=data, headers=headers)
    except (Exception, GeventTimeout) as exc:  # one failed request, as Locust counts it; never the user's end
        response = getattr(exc, "response", None)
        return response if response is not None else NoAnswer(exc)


def judge(
    resp: Any, status: int, content: bytes, read_error: BaseException | None, payload: RequestPayload, ctx: RunContext
) -> tuple[str, int | None]:
    """The request's error ("" when it succeeded) and the input tokens the answer reported."""
    conn_error = read_error if read_error is not None else getattr(resp, "error", None) if not status else None
    if payload.expect_failure:
        return ("" if 400 <= status < 500 else f"expected a 4xx rejection, got {status or conn_error}"), None
    if conn_error is not None:
        return f"{type(conn_error).__name__}: {conn_error}", None
    if status != 200:
        return (f"HTTP {status}" if status else "no answer"), None
    target, protocol = ctx.scenario.target, ctx.protocol
    error, tokens = protocol.check_answer(content, payload, ctx.scenario.payload.task, target, ctx)
    if tokens is None and resp.headers is not None:
        tokens = protocol.header_tokens(resp.headers.get)
    return error, tokens


def send_embeddings(
    client: FastHttpSession, ctx: RunContext, payload: RequestPayload, t_intended_unix_s: float | None = None,
    stage: Stage | None = None, on_answer: Callable[[bytes], object] | None = None,
) -> RequestRow:
    """Post one request, report it to Locust, record its row and return it. on_answer gets a good answer's
    body first (a canary compares both sides' vectors). Reported through Locust's request event, not
    `catch_response`, which copies every response; the timing headers are stored raw and parsed by the
    recorder a batch at a time, off the request path."""
    target = ctx.scenario.target
    task = ctx.scenario.payload.task
    protocol = ctx.protocol
    url = f"{client.base_url}{target.path}"  # as FastHttpSession._build_url does for a relative path
    data = protocol.request_body(payload, task, target)
    request_id = next(ctx.request_ids)
    headers = {**_request_headers(client, ctx), REQUEST_ID_HEADER: request_id}  # a copy: requests overlap
    t_sent = time.time()
    p_sent = time.perf_counter()
    t_intended = t_sent if t_intended_unix_s is None else t_intended_unix_s
    read_error: BaseException | None = None
    try:
        resp = post(client, url, data, headers)
        try:
            content = resp.content or b""
        except (Exception, GeventTimeout) as exc:  # a broken answer fails this request only, as Locust counts it
            read_error, content = exc, b""
    except GreenletExit:  # the run stopped this user mid-request (after its stop timeout): say so in a row
        in_flight_s = time.perf_counter() - p_sent
        reason = f"{CUT_OFF_PREFIX} the run stopped {in_flight_s:.1f} s into the request"
        dropped_row(ctx, payload, t_intended, reason, stage, t_sent_unix_s=t_sent, request_id=request_id)
        raise
    latency_ms = (time.perf_counter() - p_sent) * 1000.0
    status = int(resp.status_code or 0)
    error, tokens = judge(resp, status, content, read_error, payload, ctx)
    if on_answer is not None and not error:
        on_answer(content)
    client.request_event.fire(
        request_type="POST", name=payload.endpoint, context={}, response=resp,
        exception=RequestFailed(error) if error else None, start_time=t_sent, url=url,
        response_length=len(content), response_time=latency_ms,
    )
    headers_in = resp.headers
    t_done = t_sent + latency_ms / 1000.0
    queue, tokenize, compute, post_ms, total, batch_size, batch_tokens = (
        protocol.raw_timing(headers_in.get) if headers_in is not None else _NO_TIMING
    )
    served_model = headers_in.get(SERVED_MODEL_HEADER) if headers_in is not None else None  # raw: recorder
    probe_cosine: float | None = None
    if payload.reference is not None and not error:
        probe_cosine = answer_cosine(content, payload.reference, protocol.dense_vectors)
    row = RequestRow(
        worker=ctx.worker, t_intended_unix_s=t_intended, t_sent_unix_s=t_sent, t_done_unix_s=t_done,
        latency_ms=latency_ms, latency_from_intended_ms=(t_done - t_intended) * 1000.0,
        endpoint=payload.endpoint, status_code=status or None, ok=not error, error=error or None,
        n_inputs=payload.texts, input_chars=payload.input_chars, input_tokens=tokens,
        response_bytes=len(content),
        srv_queue_ms=queue, srv_tokenize_ms=tokenize, srv_compute_ms=compute, srv_post_ms=post_ms,
        srv_total_ms=total, batch_size=batch_size, batch_tokens=batch_tokens, probe_cosine=probe_cosine,
        request_id=request_id, served_model=served_model, documents=payload.documents,
    )
    return _record(ctx, row, stage)


def dropped_row(
    ctx: RunContext, payload: RequestPayload, t_intended_unix_s: float, reason: str,
    stage: Stage | None, t_sent_unix_s: float | None = None, request_id: str | None = None,
) -> RequestRow:
    """A request without an answer, recorded: not startable in time, or cut off by the run's stop."""
    row = RequestRow(
        worker=ctx.worker, t_intended_unix_s=t_intended_unix_s, t_sent_unix_s=t_sent_unix_s,
        request_id=request_id, endpoint=payload.endpoint, ok=False, error=reason, n_inputs=payload.texts,
        input_chars=payload.input_chars, documents=payload.documents,
    )
    return _record(ctx, row, stage)


def _record(ctx: RunContext, row: RequestRow, stage: Stage | None) -> RequestRow:
    """Tag the row with its stage (when the sender knows it) and hand it to the run's sink."""
    if stage is not None:
        row.stage_index, row.stage_label, row.target_users, row.target_rate = stage
    ctx.sink(row)
    return row

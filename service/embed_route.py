"""The serving routes: POST /v1/embeddings (body -> limits -> validation -> cache -> batcher -> OpenAI-shaped
answer) and POST /rerank (TEI's request -> the query and texts embedded as one request -> texts by score).

Admission (429 before the body is read) and API keys are checked by the middlewares in front of them
(service/admission.py); here the body is read under its size and time limits, the request is
validated and computed, and a client that hangs up meanwhile cancels its work through the ASGI receive channel.
Every answer names the model that produced its vectors (`model`, `X-Served-Model`) and says where its time
went (`Server-Timing`, the access log). Both routes go through one frame (`serve_route`, `embed_texts`,
`answer_headers`), so limits, cancellation, caching and timing stay one implementation: a rerank's query and
texts are one request's inputs (one token budget, one deadline, one fair share); only its wire format and
scoring are its own (service/rerank_api.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from starlette.types import Receive, Scope

from service.batch_errors import BatcherError
from service.batch_job import CLIENT_DISCONNECTED, BatchResult
from service.cache import CacheLookup
from service.http_errors import JSON_TYPE, Answer, api_error, json_answer
from service.openai_api import (
    CLIENT_CLOSED_REQUEST,
    ApiError,
    dump_json,
    encode_vector,
    parse_embedding_request,
    server_timing,
    shorten,
)
from service.request_io import cancelled_on_hang_up, client_gone, header, limit_chars, read_body
from service.request_record import RequestRecord, record_of
from service.rerank_api import parse_rerank_request, ranked, rerank_payload
from service.state import ServiceState

PARSE_OFF_LOOP_BYTES = 64 * 1024  # bodies above this are parsed on a thread so the event loop stays free
SERVED_MODEL_HEADER = "X-Served-Model"

# A route's own work, given the request, its raw body (read under the limits), when it started and its record.
RouteHandler = Callable[[ServiceState, Scope, bytes, float, RequestRecord | None], Awaitable[Answer]]
T = TypeVar("T")


@dataclass(frozen=True)
class Embedded:
    """The vectors of one request's texts, from the cache or the batcher, and what produced them."""

    vectors: np.ndarray  # one normalised row per text, in request order
    tokens: list[int]  # tokens per text
    result: BatchResult  # the batcher's answer for the texts the cache missed (empty when none)
    cached: CacheLookup
    use_cache: bool


async def serve_route(state: ServiceState, scope: Scope, receive: Receive, handler: RouteHandler) -> Answer:
    """The frame of a serving route: every ApiError becomes its JSON answer with a Server-Timing total."""
    record = record_of(scope)
    t_start_s = record.t_start_s if record is not None else time.perf_counter()
    state.metrics.writes.inc(state.metrics.inflight)
    try:
        return await _limited(state, scope, receive, handler, t_start_s, record)
    except asyncio.CancelledError:  # the server cut the request off (the end of the shutdown grace)
        if record is not None:
            record.status, record.error = 500, "cancelled"  # the server answers a cancelled request 500
        raise
    except ApiError as exc:
        if record is not None:
            record.error = exc.code
        if exc.status == CLIENT_CLOSED_REQUEST:  # nobody reads it
            return CLIENT_CLOSED_REQUEST, b"", {}
        return json_answer(exc.status, exc.body(), exc.headers, t_start_s)
    finally:
        state.metrics.writes.inc(state.metrics.inflight, -1.0)


async def _limited(
    state: ServiceState, scope: Scope, receive: Receive, handler: RouteHandler, t_start_s: float,
    record: RequestRecord | None,
) -> Answer:
    if not state.ready or state.batcher is None or state.model is None:
        message = "the model is still loading or warming up; retry shortly"
        raise ApiError(503, message, "model_not_ready", "server_error", headers={"Retry-After": "1"})
    s = state.settings
    # The body is read before any slot is taken, under a size limit and a deadline: a slow or huge upload
    # costs its own connection only.
    raw_body = await read_body(scope, receive, s.max_body_bytes, s.body_timeout_s)
    admitted, retry_after_s = state.rate.try_acquire()
    if not admitted:
        message = f"rate limit of {s.rate_limit_qps:g} requests/s exceeded"
        headers = {"Retry-After": str(retry_after_s)}
        raise ApiError(429, message, "rate_limit_exceeded", "rate_limit_error", headers=headers)
    if not state.concurrency.try_acquire():
        message, headers = f"more than {s.max_concurrency} requests in flight", {"Retry-After": "1"}
        raise ApiError(429, message, "too_many_concurrent_requests", "rate_limit_error", headers=headers)
    try:
        async with cancelled_on_hang_up(receive):
            return await handler(state, scope, raw_body, t_start_s, record)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if CLIENT_DISCONNECTED not in exc.args or task is None:
            raise
        task.uncancel()
        raise client_gone() from None
    finally:
        state.concurrency.release()


async def parse_body(parse: Callable[..., T], scope: Scope, raw_body: bytes, *limits: Any) -> T:
    """parse(content type, body, *limits), on a thread when the body is large so the event loop stays free."""
    args = (header(scope, b"content-type") or "", raw_body, *limits)
    return await asyncio.to_thread(parse, *args) if len(raw_body) > PARSE_OFF_LOOP_BYTES else parse(*args)


def check_model(state: ServiceState, model: str | None) -> None:
    """404 when a request names a model this service does not serve (None: the request named none)."""
    if model is not None and model != state.settings.model_name and model not in state.served_names():
        message = f"The model '{model}' does not exist; this service serves '{state.settings.model_name}'"
        raise ApiError(404, message, "model_not_found", param="model")


async def embeddings(
    state: ServiceState, scope: Scope, raw_body: bytes, t_start_s: float, record: RequestRecord | None
) -> Answer:
    """POST /v1/embeddings, inside `serve_route`."""
    assert state.model is not None
    s = state.settings
    body = await parse_body(parse_embedding_request, scope, raw_body, s.max_inputs, state.model.dimension)
    if body.model is None:
        message = f"'model' is required; this service serves '{s.model_name}'"
        raise ApiError(422, message, "missing_model", param="model")
    check_model(state, body.model)
    embedded = await embed_texts(state, body.texts, record)
    t_post_s = time.perf_counter()
    usage = sum(embedded.tokens)
    data = [
        {"object": "embedding", "index": i, "embedding": encode_vector(vector, body.encoding_format)}
        for i, vector in enumerate(shorten(embedded.vectors, body.dimensions))
    ]
    model, usage_counts = embedded.result.model, {"prompt_tokens": usage, "total_tokens": usage}
    content = dump_json({"object": "list", "data": data, "model": model, "usage": usage_counts})
    return 200, content, answer_headers(state, embedded, t_start_s, t_post_s, record)


async def embed_texts(state: ServiceState, texts: list[str], record: RequestRecord | None) -> Embedded:
    """The vectors of texts, cut or refused at the character limit: from the cache, else through the batcher
    as one request's inputs (one token budget, deadline and fair share), then cached."""
    assert state.batcher is not None and state.model is not None
    s = state.settings
    texts = limit_chars(texts, s.max_input_chars, s.long_input, state.model.max_tokens)
    if record is not None:
        record.inputs = len(texts)
    main_id = state.settings.model_name
    model_id = state.batcher.model_for_new_request()
    use_cache = model_id == main_id  # the cache holds the main model's vectors only: never mix the two
    n = len(texts)
    vectors = np.empty((n, state.model.dimension), dtype=np.float32)
    tokens = [0] * n
    cached = await state.cache.lookup(texts) if use_cache else CacheLookup([None] * n)
    missing = cached.missing
    for index, entry in enumerate(cached.entries):
        if entry is not None:
            vectors[index], tokens[index] = entry.vector, entry.tokens
    result = BatchResult(np.empty((0, 0)), [], 0.0, 0.0, 0.0, 0, 0, main_id)
    if missing:
        try:  # the request is work from here on: judged on its real inputs once they are tokenised
            result = await state.batcher.submit([texts[i] for i in missing], s.deadline_ms, model=model_id)
        except BatcherError as exc:
            raise api_error(exc, missing, state.batcher.drain_s(), state.model.max_tokens) from None
        for row, index in enumerate(missing):
            vectors[index], tokens[index] = result.embeddings[row], result.token_counts[row]
        if use_cache:
            await state.cache.store([(texts[i], vectors[i], tokens[i]) for i in missing])
    return Embedded(vectors, tokens, result, cached, use_cache)


def answer_headers(
    state: ServiceState, embedded: Embedded, t_start_s: float, t_post_s: float, record: RequestRecord | None
) -> dict[str, str]:
    """The headers of a successful answer (Server-Timing, batch, served model, cache), its stage metrics and
    its access-log fields; call it once the body is encoded (post: from t_post_s until now)."""
    result = embedded.result
    t_end_s = time.perf_counter()
    stages = {
        "queue": result.queue_ms,
        "tokenize": result.tokenize_ms,
        "compute": result.compute_ms,
        "post": (t_end_s - t_post_s) * 1000,
        "total": (t_end_s - t_start_s) * 1000,
    }
    for stage, histogram in state.metrics.stage_seconds.items():
        state.metrics.writes.observe(histogram, stages[stage] / 1000)
    if record is not None:
        record.tokens, record.model = sum(embedded.tokens), result.model
        record.queue_ms, record.tokenize_ms = result.queue_ms, result.tokenize_ms
        record.compute_ms = result.compute_ms
    headers = {
        **JSON_TYPE,
        "Server-Timing": server_timing(stages),
        "X-Batch-Size": str(result.batch_size),
        "X-Batch-Tokens": str(result.batch_tokens),
        SERVED_MODEL_HEADER: result.model,
    }
    if state.cache.enabled and embedded.use_cache:
        headers["X-Cache"] = embedded.cached.header()
    return headers


async def rerank(
    state: ServiceState, scope: Scope, raw_body: bytes, t_start_s: float, record: RequestRecord | None
) -> Answer:
    """POST /rerank, inside `serve_route`."""
    assert state.model is not None
    s = state.settings
    body = await parse_body(parse_rerank_request, scope, raw_body, s.max_inputs)
    check_model(state, body.model)
    service_truncates = s.long_input == "truncate"
    if body.truncate is not None and body.truncate != service_truncates:
        message = (
            f"this service handles long inputs as its --long-input {s.long_input} says; send "
            f"'truncate': {json.dumps(service_truncates)} or leave 'truncate' out"
        )
        raise ApiError(422, message, "truncate_unsupported", param="truncate")
    # input[0] is the query, input[i] is texts[i - 1] (in the messages of the character and token limits)
    embedded = await embed_texts(state, [body.query, *body.texts], record)
    t_post_s = time.perf_counter()
    ranks = ranked(embedded.vectors[0], embedded.vectors[1:], body.raw_scores)
    content = json.dumps(rerank_payload(ranks, body.texts, body.return_text), separators=(",", ":")).encode()
    return 200, content, answer_headers(state, embedded, t_start_s, t_post_s, record)

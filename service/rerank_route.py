"""POST /rerank: TEI's rerank request -> the query and texts embedded as one request -> texts by bi-encoder score.

It goes through the embeddings route's frame (service/embed_route.py): API keys and admission in front, the
body read under its limits, rate and concurrency limits, hang-ups cancelling the work, the cache, the batcher
(the query and the texts are one request's inputs: one token budget, one deadline, one fair share), the same
error envelope and the same Server-Timing, batch and X-Served-Model headers. Only the wire format and the
scoring are its own (service/rerank_api.py).
"""

from __future__ import annotations

import json
import time

from fastapi import Request
from fastapi.responses import Response

from service.embed_route import answer_headers, check_model, embed_texts, parse_body, serve_route
from service.openai_api import ApiError
from service.request_io import limit_chars
from service.request_record import RequestRecord
from service.rerank_api import parse_rerank_request, ranked, rerank_payload
from service.state import ServiceState


async def rerank(state: ServiceState, request: Request) -> Response:
    """POST /rerank."""
    return await serve_route(state, request, lambda *args: _rerank(state, *args))


async def _rerank(
    state: ServiceState, request: Request, raw_body: bytes, t_start_s: float, record: RequestRecord | None
) -> Response:
    assert state.model is not None
    s = state.settings
    body = await parse_body(parse_rerank_request, request, raw_body, s.max_inputs)
    check_model(state, body.model)
    service_truncates = s.long_input == "truncate"
    if body.truncate is not None and body.truncate != service_truncates:
        raise ApiError(
            422,
            f"this service handles long inputs as its --long-input {s.long_input} says; send "
            f"'truncate': {json.dumps(service_truncates)} or leave 'truncate' out",
            "truncate_unsupported",
            param="truncate",
        )
    # input[0] is the query, input[i] is texts[i - 1] (in the messages of the character and token limits)
    inputs = limit_chars([body.query, *body.texts], s.max_input_chars, s.long_input, state.model.max_tokens)
    if record is not None:
        record.inputs = len(inputs)
    embedded = await embed_texts(state, request.scope, inputs)
    t_post_s = time.perf_counter()
    ranks = ranked(embedded.vectors[0], embedded.vectors[1:], body.raw_scores)
    content = json.dumps(rerank_payload(ranks, body.texts, body.return_text), separators=(",", ":"))
    headers = answer_headers(state, embedded, t_start_s, t_post_s, record)
    return Response(content, media_type="application/json", headers=headers)

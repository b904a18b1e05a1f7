"""The rerank wire format of text-embeddings-inference (`POST /rerank`), scored by a bi-encoder: request
validation, the scores and their order, and the request body's schema for the OpenAPI document.

TEI scores each (query, text) pair with a cross-encoder. This service holds an embedding model only, so its
score is the cosine of the query's and the text's normalised embeddings, mapped to [0, 1] as (cosine + 1) / 2
(with `raw_scores`, the cosine itself, in [-1, 1]). `/info` names the scorer (`rerank.kind`) so that nobody
takes these scores for a cross-encoder's relevance: they order documents as the embedding model would in a
vector search, which is what a rerank load needs to exercise, not what a reranker would answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from service.openai_api import bad_request, check_text, json_object, text_list

RERANK_KIND = "bi-encoder cosine"
RERANK_SCORE = "(cosine + 1) / 2 in [0, 1]; with raw_scores: the cosine in [-1, 1]"
QUERY_INPUTS = 1  # the query is embedded with the texts, as one more input of the same request


@dataclass(frozen=True)
class RerankRequest:
    query: str
    texts: list[str]
    raw_scores: bool
    return_text: bool
    truncate: bool | None  # None: the service's --long-input decides (TEI's auto-truncate)
    model: str | None  # optional here (TEI has no such field); when given, it must be a served name


def max_texts(max_inputs: int) -> int:
    """Most texts in one rerank request: the request's inputs (query + texts) stay within --max-inputs."""
    return max_inputs - QUERY_INPUTS


def parse_rerank_request(content_type: str, raw_body: bytes, max_inputs: int) -> RerankRequest:
    """Validate one POST /rerank body; every problem becomes a 4xx ApiError that says what to send."""
    payload = json_object(content_type, raw_body, "query")
    if payload.get("query") is None:
        message = "'query' is required: the text to rank the 'texts' against"
        raise bad_request(message, "missing_query", "query")
    query = check_text(payload["query"], "query", "query", "'query'")
    texts = _parse_texts(payload.get("texts"), max_texts(max_inputs))
    flags = {name: payload.get(name, False) for name in ("raw_scores", "return_text")}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise bad_request(f"'{name}' must be true or false, got {value!r}", "invalid_request", name)
    truncate = payload.get("truncate")
    if truncate is not None and not isinstance(truncate, bool):
        message = f"'truncate' must be true, false or null, got {truncate!r}"
        raise bad_request(message, "invalid_request", "truncate")
    model = payload.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request("'model' must be a string", "invalid_model", "model")
    return RerankRequest(query, texts, flags["raw_scores"], flags["return_text"], truncate, model)


def _parse_texts(value: Any, most: int) -> list[str]:
    if value is None:
        raise bad_request("'texts' is required: a list of the strings to rank", "missing_texts", "texts")
    limit = most + QUERY_INPUTS
    why = f" (the query and the texts are embedded as one request's inputs, within --max-inputs {limit})"
    return text_list(value, "texts", most, "a list of strings", why)


def ranked(query_vector: np.ndarray, text_vectors: np.ndarray, raw_scores: bool) -> list[tuple[int, float]]:
    """(text index, score) by score, highest first (equal scores: lower index first). The cosine is computed
    from the vectors as given, normalised again, so a vector that is not exactly of unit length (reduced
    precision) still scores within [-1, 1]."""
    unit_query = query_vector / max(float(np.linalg.norm(query_vector)), 1e-12)
    norms = np.maximum(np.linalg.norm(text_vectors, axis=1), 1e-12)
    cosines = np.clip((text_vectors @ unit_query) / norms, -1.0, 1.0)
    scores = cosines if raw_scores else (cosines + 1.0) / 2.0
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    return [(i, float(scores[i])) for i in order]


def rerank_payload(ranks: list[tuple[int, float]], texts: list[str], return_text: bool) -> list[dict[str, Any]]:
    """TEI's answer: [{"index", "text" (with return_text), "score"}] in the order given."""
    return [{"index": i, **({"text": texts[i]} if return_text else {}), "score": score} for i, score in ranks]


def rerank_body_schema(max_inputs: int, max_input_chars: int) -> dict[str, Any]:
    """The JSON schema of a POST /rerank body, for the OpenAPI document (the route reads raw bytes)."""
    text = {"type": "string", "minLength": 1, "maxLength": max_input_chars}
    return {
        "title": "RerankRequest",
        "type": "object",
        "required": ["query", "texts"],
        "properties": {
            "query": {**text, "description": "The text the texts are ranked against."},
            "texts": {"type": "array", "items": text, "minItems": 1, "maxItems": max_texts(max_inputs)},
            "raw_scores": {
                "type": "boolean",
                "default": False,
                "description": "The cosine, not (cosine+1)/2.",
            },
            "return_text": {"type": "boolean", "default": False},
            "truncate": {
                "type": ["boolean", "null"],
                "default": None,
                "description": "Must agree with the service's --long-input when given.",
            },
            "model": {"type": "string", "description": "Optional: the served model id (or an alias)."},
        },
    }

"""Hugging Face text-embeddings-inference (TEI, also built for Ascend NPUs): /embed, /embed_sparse, /rerank.

    POST /embed         {"inputs": [...]} -> [[float, ...], ...]
    POST /embed_sparse  {"inputs": [...]} -> [[{"index", "value"}, ...], ...]
    POST /rerank        {"query", "texts": [...]} -> [{"index", "score"}, ...]
    GET  /info          {"model_id", "model_type", "max_client_batch_size", ...}

Requests name no model (one process serves one). TEI's timing headers (whole milliseconds) fill the row's
server timings as the reference service's Server-Timing does (TIMING_HEADERS), x-compute-tokens its input
tokens."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.traffic.headers import int_or_none
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.base import (
    Checked,
    Expectations,
    Fetch,
    HeaderGetter,
    TargetProtocol,
    json_text,
    parse_json,
    vector_rows,
)
from loadgen.traffic.protocols.checks import check_sparse, check_vectors
from loadgen.traffic.protocols.openai import check_tei_ranks
from scenarios.models import Target, Task

# TEI header -> the Server-Timing metric of the reference service that means the same
TIMING_HEADERS: dict[str, str] = {
    "x-queue-time": "queue", "x-tokenization-time": "tokenize", "x-inference-time": "compute",
    "x-total-time": "total",
}
TOKENS_HEADER = "x-compute-tokens"
PATHS: dict[str, str] = {"embed": "/embed", "embed_sparse": "/embed_sparse", "rerank": "/rerank"}


def server_timing(get_header: HeaderGetter) -> str | None:
    """TEI's timing headers as one Server-Timing value (None without them), for the one parser."""
    values = {metric: get_header(header) for header, metric in TIMING_HEADERS.items()}
    entries = [f"{m};dur={v.strip()}" for m, v in values.items() if isinstance(v, str) and v.strip()]
    return ", ".join(entries) or None


class TeiProtocol(TargetProtocol):
    name = "tei"
    label = "text-embeddings-inference (TEI)"
    tasks = ("embed", "embed_sparse", "rerank")
    detect_path = "/info"
    metric_names = {
        "queue_depth": "te_queue_size", "batch_size_mean": "te_batch_next_size",
        "request_rate_qps": "te_request_success",
    }

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        return prefix + PATHS[task]

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        if task == "rerank":
            return json_text({"query": payload.query, "texts": payload.inputs})
        return json_text({"inputs": payload.inputs})

    def check_doc(self, doc: Any, payload: RequestPayload, task: Task, expect: Expectations) -> Checked:
        if task == "rerank":
            return check_tei_ranks(doc, len(payload.inputs)), None
        if task == "embed_sparse":
            return check_sparse(doc, len(payload.inputs)), None
        return check_vectors(doc, len(payload.inputs), expect), None

    def dense_vectors(self, body: bytes) -> list[np.ndarray] | None:
        doc, error = parse_json(body)
        return None if error else vector_rows(doc)

    def raw_timing(self, get_header: HeaderGetter) -> list[Any]:
        return [server_timing(get_header), None, None, None, None, None, None]

    def header_tokens(self, get_header: HeaderGetter) -> int | None:
        return int_or_none(get_header(TOKENS_HEADER))

    def shows(self, doc: dict[str, Any]) -> bool:
        """TEI's /info: a model_id and a model_type (embedding, reranker, classifier)."""
        return {"model_id", "model_type"} <= doc.keys()

    def served_models(self, fetch: Fetch, prefix: str) -> list[str]:
        info = fetch("/info").doc
        model = info.get("served_model_name") or info.get("model_id")
        return [model] if isinstance(model, str) else []

    def service_info(self, raw: Any, model: str) -> dict[str, Any] | None:
        """TEI's /info with its model id as the manifest's `model`."""
        if not isinstance(raw, dict):
            return None
        return {**raw, "model": raw.get("served_model_name") or raw.get("model_id")}


PROTOCOL = TeiProtocol()

"""Ollama: `POST /api/embed` {"model", "input": [...]} -> {"embeddings": [[...]], "prompt_eval_count"}.

Its models are listed at GET /api/tags ({"models": [{"name": "nomic-embed-text:latest"}]}); it has no
Prometheus endpoint and no per-request timing headers (its answer's durations cover the whole call)."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.base import (
    Checked,
    Expectations,
    TargetProtocol,
    json_text,
    listed_model,
    parse_json,
    vector_rows,
)
from loadgen.traffic.protocols.checks import check_vectors
from scenarios.models import Target, Task


class OllamaProtocol(TargetProtocol):
    name = "ollama"
    label = "Ollama"
    tasks = ("embed",)
    health_path = "/api/version"
    detect_path = models_path = "/api/tags"
    models_key, models_field = "models", "name"

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        return f"{prefix}/api/embed"

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        return json_text({"model": target.model, "input": payload.inputs})

    def check_doc(self, doc: Any, payload: RequestPayload, task: Task, expect: Expectations) -> Checked:
        doc = doc if isinstance(doc, dict) else {}
        tokens = doc.get("prompt_eval_count")
        tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
        return check_vectors(doc.get("embeddings"), len(payload.inputs), expect), tokens

    def dense_vectors(self, body: bytes) -> list[np.ndarray] | None:
        doc, error = parse_json(body)
        return None if error or not isinstance(doc, dict) else vector_rows(doc.get("embeddings"))

    def info_path(self, target: Target) -> str:
        return "/api/tags"

    def service_info(self, raw: Any, model: str) -> dict[str, Any] | None:
        return listed_model(raw, model, key="models", field="name")

    def shows(self, doc: dict[str, Any]) -> bool:
        return isinstance(doc.get("models"), list)


PROTOCOL = OllamaProtocol()

"""What the access log says about one request, filled in by the layers that know it (one object per request)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from starlette.types import Scope

RECORD_KEY = "embedperf.record"  # scope["state"] key of the request's RequestRecord


@dataclass
class RequestRecord:
    """What the access log says about one request; the embeddings route fills in the embedding fields."""

    request_id: str
    method: str
    path: str
    t_start_s: float
    status: int = 0
    error: str | None = None  # the error code of a refusal or failure
    inputs: int | None = None
    tokens: int | None = None
    queue_ms: float | None = None
    tokenize_ms: float | None = None
    compute_ms: float | None = None
    model: str | None = None  # the model that produced the vectors

    def line(self) -> str:
        """The access-log line: one JSON object, fields the request never had left out."""
        fields: dict[str, Any] = {"ts_unix_s": round(time.time(), 6)}
        for name, value in vars(self).items():  # shallow: dataclasses.asdict would deep-copy
            if name != "t_start_s" and value is not None:
                fields[name] = round(value, 3) if isinstance(value, float) else value
        fields["total_ms"] = round((time.perf_counter() - self.t_start_s) * 1000, 3)
        return json.dumps(fields, separators=(",", ":"))


def record_of(scope: Scope) -> RequestRecord | None:
    """The request's record (None outside the service's stack)."""
    return scope.get("state", {}).get(RECORD_KEY)

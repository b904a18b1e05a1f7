"""The target as `embedperf verify` sees it over HTTP: probes, embeddings, /info and /metrics as typed snapshots.

Every layer talks to the target through this one client: one HTTP stack, one place for the API key."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from embedperf.errors import TargetError
from embedperf.schema import REQUEST_ID_HEADER

REQUEST_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 5.0
# Counters whose increase during the soak the stability layer judges (names as service/metrics.py has them).
OOM_SPLITS = "embedperf_oom_splits_total"
DEVICE_ERRORS = "embedperf_device_errors_total"
SERVED = "embedperf_served_requests_total"
FALLBACK = "embedperf_fallback_requests_total"


@dataclass(frozen=True)
class Answer:
    """One HTTP exchange: status (0 when nothing answered), headers, the body parsed as JSON when it is."""

    status: int
    headers: dict[str, str]
    body: Any
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200

    def describe(self) -> str:
        return f"HTTP {self.status}" if self.status else f"no answer ({self.error})"


@dataclass(frozen=True)
class InfoSnapshot:
    """What /info says about the process serving: restarts show as a new pid or start time."""

    pid: int | None
    started_unix_s: float | None
    dimension: int | None
    model: str | None
    fallback_model: str | None = None

    def same_process(self, other: InfoSnapshot) -> bool | None:
        """Whether `other` is the same process (None when /info names neither pid nor start time)."""
        if self.pid is None and self.started_unix_s is None:
            return None
        return self.pid == other.pid and self.started_unix_s == other.started_unix_s


@dataclass(frozen=True)
class MetricsSnapshot:
    """The target's /metrics: every sample name it exposes and the sum of each counter's samples."""

    names: frozenset[str]
    totals: dict[str, float] = field(default_factory=dict)

    def increase(self, later: MetricsSnapshot, name: str) -> float | None:
        """How much counter `name` grew up to `later` (None when either snapshot lacks it)."""
        if name not in self.totals and name not in later.totals:
            return None
        return later.totals.get(name, 0.0) - self.totals.get(name, 0.0)


def parse_metrics(text: str) -> MetricsSnapshot:
    """Sample names (a histogram's _bucket/_sum/_count, a counter's _total) and per-name sums."""
    names: set[str] = set()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names.update(f"{family.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        for sample in family.samples:
            names.add(sample.name)
            if math.isfinite(sample.value):
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return MetricsSnapshot(frozenset(names), totals)


class TargetClient:
    """HTTP to the target with its API key (from `api_key_env`). One httpx client (building one costs ~40 ms:
    the CA bundle), each request on a fresh connection, so a probe never rides on one to a process that was
    there before a restart. Close it when done."""

    def __init__(self, base_url: str, model: str, api_key_env: str = "EMBEDPERF_TARGET_API_KEY") -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        key = os.environ.get(api_key_env, "").strip()
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TargetClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> Answer:
        try:
            resp = self._http.request(
                method,
                f"{self.base_url}{path}",
                json=json_body,
                headers={**self.headers, **(headers or {})},
                timeout=timeout_s,
            )
        except httpx.HTTPError as exc:
            return Answer(0, {}, None, f"{type(exc).__name__}: {exc}")
        try:
            body = resp.json()
        except ValueError:
            body = resp.text
        return Answer(resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, body)

    def get(self, path: str, timeout_s: float = PROBE_TIMEOUT_S) -> Answer:
        return self.request("GET", path, timeout_s=timeout_s)

    def embed(self, inputs: list[str], request_id: str | None = None) -> Answer:
        """POST /v1/embeddings; request_id is sent as X-Request-ID when given."""
        headers = {REQUEST_ID_HEADER: request_id} if request_id else {}
        return self.request("POST", "/v1/embeddings", {"input": inputs, "model": self.model}, headers)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """The target's vectors for `texts`, in batches; TargetError when an answer is not embeddings."""
        out: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            answer = self.embed(chunk)
            got = embeddings_of(answer) if answer.ok else None
            if got is None or len(got) != len(chunk):
                raise TargetError(
                    f"{self.base_url}/v1/embeddings answered {answer.describe()} to {len(chunk)} texts "
                    "instead of one embedding each"
                )
            out += got
        if len(dims := {len(v) for v in out}) != 1:
            raise TargetError(f"the target returned vectors of {len(dims)} different sizes")
        return np.asarray(out, dtype=np.float64)

    def info(self, path: str) -> InfoSnapshot:
        answer = self.get(path)
        body = answer.body if answer.ok and isinstance(answer.body, dict) else {}

        number = {k: float(v) for k, v in body.items() if isinstance(v, int | float)}
        text = {k: str(v) for k, v in body.items() if v}
        pid, dim = number.get("pid"), number.get("dimension")
        return InfoSnapshot(
            pid=int(pid) if pid is not None else None,
            started_unix_s=number.get("started_unix_s"),
            dimension=int(dim) if dim is not None else None,
            model=text.get("model"),
            fallback_model=text.get("fallback_model"),
        )

    def metrics(self, path: str) -> MetricsSnapshot | None:
        """The parsed exposition; None when the target has none at `path`."""
        answer = self.get(path)
        if not answer.ok or not isinstance(answer.body, str):
            return None
        try:
            return parse_metrics(answer.body)
        except ValueError as exc:
            raise TargetError(f"{self.base_url}{path} is not Prometheus text: {exc}") from exc


def embeddings_of(answer: Answer) -> list[list[float]] | None:
    """The vectors of an OpenAI-style answer in input order (None when the body is not one)."""
    body = answer.body
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return None
    try:
        rows = sorted(body["data"], key=lambda item: int(item.get("index", 0)))
        vectors = [row["embedding"] for row in rows]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return vectors if all(isinstance(v, list) for v in vectors) else None

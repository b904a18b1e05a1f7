"""Per-step request statistics: stage assignment, warm-up trim, outcome split, exact percentiles."""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, Field

# numpy.percentile method; "linear" is numpy's default (Hyndman & Fan type 7). The report states it.
PERCENTILE_METHOD: Final = "linear"
PERCENTILES_PCT: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}
MIN_SAMPLES_P99 = 100
MIN_SAMPLES_P999 = 1000
TIMEOUT_STATUS_CODES = frozenset({408, 504})
VALIDATION_ENDPOINT_PREFIX = "validation"

OUTCOME_OK = 0
OUTCOME_ERROR = 1
OUTCOME_TIMEOUT = 2


class LatencyStats(BaseModel):
    """Exact statistics of one latency sample in ms (None where the sample is empty)."""

    n: int = Field(default=0, description="Rows in the sample (every percentile is exact over all).")
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = Field(default=None, description="The SLO's percentile (see p99_ci_ms).")
    p999_ms: float | None = Field(default=None, description="Its step warns below MIN_SAMPLES_P999 rows.")
    max_ms: float | None = None


class ServerStats(BaseModel):
    """Means of the server's own Server-Timing stages and batch sizes over ok rows that carry them."""

    n: int = 0
    queue_ms: float | None = Field(default=None, description="Waiting in the server's queue for a batch.")
    tokenize_ms: float | None = None
    compute_ms: float | None = None
    post_ms: float | None = None
    total_ms: float | None = Field(default=None, description="The server's whole time (Server-Timing total).")
    batch_size_mean: float | None = None
    batch_size_p50: float | None = None
    batch_size_max: float | None = None


class OpenLoopStats(BaseModel):
    """Open loop: latency from the intended send time and how far the generator fell behind."""

    from_intended: LatencyStats = LatencyStats()
    n_late: int = 0
    lateness_p99_ms: float | None = None
    n_dropped: int = 0


class StepStats(BaseModel):
    index: int
    label: str
    users: int | None = None
    rate: float | None = None
    steady_start_unix_s: float
    steady_end_unix_s: float
    duration_s: float
    n_requests: int
    n_ok: int
    n_error: int
    n_timeout: int
    n_probe: int
    n_warmup_trimmed: int
    qps: float = Field(description="Goodput: successful requests per second (same as goodput_qps).")
    ok_qps: float = Field(description="Successful requests per second (kept for older readers).")
    error_rate: float | None
    goodput_qps: float = Field(0.0, description="Successful requests per second of the steady window.")
    offered_qps: float = Field(0.0, description="All counted requests per second, failed ones included.")
    errors_by_kind: dict[str, int] = Field(
        default_factory=dict,
        description="Failed requests by kind: connection_refused, connection_reset, timeout, http_<code>, ...",
    )
    latency: LatencyStats
    p99_ci_ms: tuple[float | None, float | None] = (None, None)
    p99_dependence: float = Field(
        1.0,
        description="How many ok answers counted as one independent answer in the P99 interval (send-order "
        "batch means, decisions.search.stats.dependence_factor): answers that slow down together widen it.",
    )
    error_latency: LatencyStats = LatencyStats()
    server: ServerStats = ServerStats()
    open_loop: OpenLoopStats | None = None
    warnings: list[str] = []
    tokens_per_s: float | None = Field(
        None, description="Input tokens of successful requests per second (None when the target reports none)."
    )
    documents_per_s: float | None = Field(
        None, description="Documents ranked per second by successful rerank requests (None for other tasks)."
    )
    n_quality_probes: int = Field(0, description="Answered quality probes (payload.quality_probes).")
    quality_cosine_mean: float | None = Field(None, description="Mean cosine of probe answers to fp32.")
    quality_cosine_min: float | None = Field(None, description="Lowest cosine of a probe answer to fp32.")
    served_models: dict[str, int] = Field(
        default_factory=dict,
        description="Ok requests per model their answer named (X-Served-Model); empty when the target names none.",
    )
    unavailable_s: int | None = Field(
        None,
        description="Seconds of the steady window without a successful answer (embedperf.availability): "
        "closed loop every such second, open loop those its requests failed or hung in; None in older summaries.",
    )
    fallback_share: float | None = Field(
        default=None,
        description="Share of the ok requests naming a model that the target's /info fallback_model answered; "
        "None when no answer named a model or the target declares no fallback.",
    )

    @property
    def load(self) -> float:
        """The offered load: users (closed loop) or target rate (open loop)."""
        return float(self.rate) if self.rate is not None else float(self.users or 0)



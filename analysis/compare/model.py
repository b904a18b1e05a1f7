"""The comparison's vocabulary: what it resamples per step, how steps are keyed by load, what it finds.

Three modules share these types: analysis.compare.samples reads the Samples out of core, analysis.compare.changes
turns pairs of them into MetricChanges, and analysis.compare.gate judges each StepComparison. Keeping them
here lets each of those import the others' inputs without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from embedperf.verdicts import ChangeVerdict

LATENCY_METRICS: dict[str, float] = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0}
OVERALL_INDEX = -1  # the index of a candidate's "overall" StepComparison when no step matched


class MetricChange(BaseModel):
    """Candidate − baseline. `warning` says why the data cannot support a verdict (then `verdict` is
    "no_verdict"; see embedperf.verdicts for "no_difference", the judged absence of a change)."""

    metric: str
    base: float | None
    cand: float | None
    diff: float | None = Field(description="cand - base, in the metric's unit.")
    rel: float | None = Field(description="diff / base.")
    ci_low: float | None = Field(description="Lower end of the 95% bootstrap interval of diff.")
    ci_high: float | None
    verdict: ChangeVerdict
    warning: str | None = None
    why: dict[str, Any] | None = None  # the warning as a reason code and its numbers (compare.reasons)


class StepComparison(BaseModel):
    """One pair of steps at the same load; `*_n_ok` say whether either side has anything to compare."""

    index: int
    label: str
    base_load: float | None
    cand_load: float | None
    metrics: dict[str, MetricChange]
    base_n_ok: int
    cand_n_ok: int
    cand_index: int | None = None


@dataclass
class Samples:
    """What a comparison resamples for one step."""

    label: str
    load_key: tuple[str, float]
    latency_sorted: np.ndarray
    ok_counts: np.ndarray  # ok requests per 1 s bin of the steady window
    bin_widths_s: np.ndarray  # each bin's width; the last one may be partial
    qps: float  # goodput: ok requests per second
    n_requests: int
    n_failed: int
    telemetry: dict[str, np.ndarray]
    exact_ms: dict[float, float | None]  # the step's exact percentiles (latency_sorted may be a reservoir)
    n_ok: int  # ok rows (latency_sorted holds all of them or a bounded reservoir)
    token_counts: np.ndarray | None = None  # input tokens of ok requests per 1 s bin (None: not reported)
    unavailable_s: int | None = None  # seconds without a successful answer (StepStats.unavailable_s)
    p99_dependence: float = 1.0  # answers that count as one independent answer at the P99 (StepStats)

    @property
    def load(self) -> float:
        return self.load_key[1]


def load_key(users: int | None, rate: float | None) -> tuple[str, float]:
    """What two steps must share to be compared: the same arrival rate, or the same number of users."""
    return ("rate", round(float(rate), 6)) if rate is not None else ("users", float(users or 0))

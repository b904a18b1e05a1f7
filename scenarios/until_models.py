"""`steps.until`: hold a step until its P99 is known, rather than for a fixed time.

A step with `until` ends as soon as the 95% distribution-free interval of its P99 (order statistics of its
ok latencies after the warm-up, decisions.search.stats.quantile_ci) is no wider than `p99_rel_width` x the
P99, once it has `min_requests` ok answers and `min_s` seconds after its warm-up; else at its `duration_s`,
which becomes its longest time. The manifest records per step why it ended and the interval it had.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The fewest ok answers whose largest one bounds a P99 at 95% (1 - 0.99^n >= 0.975): below it the interval's
# upper end does not exist, so a step cannot converge (decisions.search.stats.samples_to_bound says the same).
MIN_REQUESTS_TO_BOUND_P99 = 368


class Until(BaseModel):
    """When an adaptive step has measured enough to stop."""

    model_config = ConfigDict(extra="forbid")

    p99_rel_width: float = Field(
        ...,
        gt=0,
        le=2,
        description="Stop once (upper - lower) / P99 of the P99's confidence interval is at most this (0.1: 10%).",
    )
    min_requests: int = Field(
        default=1000,
        ge=MIN_REQUESTS_TO_BOUND_P99,
        description=f"Ok answers after the warm-up before the step may stop (at least {MIN_REQUESTS_TO_BOUND_P99}, "
        "the fewest that bound a P99 at 95%).",
    )
    min_s: float = Field(default=5.0, gt=0, description="Seconds after the warm-up before the step may stop.")
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="Confidence of the P99 interval.")

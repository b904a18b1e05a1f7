"""Typed canary configuration: the stages that shift one load to a candidate, and the rollback triggers.

`embedperf canary` fills `canary:` (the two URLs, stages and windows) and `rollback:` (the triggers,
fixed before the first request) in the scenario, so they are validated once, recorded in the
manifest with the rest of the scenario, and reach Locust workers with it. Like scenarios.models it
imports nothing of the project: the manifest embeds it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_STAGES_PCT: tuple[float, ...] = (5.0, 20.0, 50.0, 100.0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Canary(_Strict):
    """One run, one load, split per request between a baseline and a candidate by stage weights."""

    enabled: bool = Field(
        default=False,
        description="Set by `embedperf canary`: the scenario's steps are then the canary's stages (one per "
        "weight, each windows_per_stage x window_s long, all at the load of step `load_step`).",
    )
    baseline_url: str = Field(default="", description="The version in service now (the run's --host).")
    candidate_url: str = Field(default="", description="The version to promote or roll back.")
    stages_pct: list[float] = Field(
        default_factory=lambda: list(DEFAULT_STAGES_PCT),
        min_length=1,
        description="Share of requests sent to the candidate at each stage, in percent.",
    )
    window_s: float = Field(default=60.0, gt=0, description="Length of one judged window.")
    windows_per_stage: int = Field(default=3, ge=1, description="Windows each stage is held for.")
    load_step: int = Field(
        default=-1,
        description="Index of the scenario step whose users (closed loop) or rate (open loop) every stage "
        "holds (default -1: the last step).",
    )
    agreement_fraction: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="Fraction of requests whose texts are also sent to the other side; the cosine of the two "
        "answers is recorded on the second request's row (agreement_cosine).",
    )
    seed: int = Field(default=0, description="Seed of the per-request side draws, so reruns split alike.")
    min_window_requests: int = Field(
        default=20,
        ge=1,
        description="A side's window with fewer requests than this is too thin for its error rate and P99 "
        "triggers (it breaks a run of latency windows).",
    )
    min_stage_requests: int = Field(
        default=50,
        ge=1,
        description="A stage whose candidate got fewer requests gives no verdict (exit 2) unless a trigger fired.",
    )
    candidate_telemetry_hosts: list[str] = Field(
        default_factory=list,
        description="Telemetry hosts (the telemetry `host` column, e.g. the candidate's `embedperf agent`) "
        "whose devices serve the candidate; empty: every accelerator the run samples.",
    )

    @field_validator("stages_pct")
    @classmethod
    def _weights(cls, stages: list[float]) -> list[float]:
        for weight in stages:
            if not 0.0 < weight <= 100.0:
                raise ValueError(f"canary.stages_pct: {weight:g} is not a share in (0, 100] percent")
        return stages


class Rollback(_Strict):
    """Rollback triggers, each judged per window while the load runs; any one stops the canary at once. A
    trigger set to null is off. The candidate is judged; the baseline's figures stand beside it."""

    max_error_rate_pct: float | None = Field(
        default=1.0, ge=0.0, le=100.0, description="Candidate error rate in a window above this (percent)."
    )
    max_p99_ms: float | None = Field(
        default=None, gt=0.0, description="Candidate P99 above this (ms) in p99_windows consecutive windows."
    )
    max_p99_increase_pct: float | None = Field(
        default=50.0,
        gt=0.0,
        description="Candidate P99 above the baseline's by more than this (percent) in p99_windows consecutive "
        "windows; the baseline's P99 of the same window, else of its last window with enough requests.",
    )
    p99_windows: int = Field(default=3, ge=1, description="Consecutive windows over a P99 limit to trigger.")
    min_agreement_cosine: float | None = Field(
        default=0.99,
        gt=0.0,
        le=1.0,
        description="Mean cosine of the candidate's answers to the baseline's for the same texts, per window, "
        "below this (0.99; 0.999 for strict uses).",
    )
    max_temp_c: float | None = Field(
        default=85.0, description="Hottest candidate device in a window above this (deg C); needs telemetry."
    )
    max_unavailable_s: float | None = Field(
        default=2.0,
        ge=0.0,
        description="Seconds of a window in which the candidate answered no request successfully although "
        "requests to it ended or hung, above this.",
    )

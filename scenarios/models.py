"""Typed scenario configuration: every YAML file under scenarios/ is validated by these models once."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ScenarioKind = Literal["ramp", "openloop", "soak", "spike"]
SCENARIO_KINDS: tuple[str, ...] = ("ramp", "openloop", "soak", "spike")
CLOSED_LOOP_KINDS: frozenset[str] = frozenset({"ramp", "soak", "spike"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Target(_Strict):
    """Where the load goes."""

    base_url: str = Field("http://127.0.0.1:8086", description="Scheme, host and port; --host overrides it.")
    path: str = Field("/v1/embeddings", description="OpenAI-style embeddings path.")
    model: str = Field("all-MiniLM-L6-v2", description="Value of the request's `model` field.")
    api_key_env: str = Field(
        "EMBEDPERF_TARGET_API_KEY",
        description="Environment variable holding the API key (sent as a Bearer token when set).",
    )
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout.")
    dimension: int | None = Field(
        None, gt=0, description="Expected embedding size when the target has no /info; else learnt."
    )
    info_path: str = Field("/info", description="Service description endpoint; absent targets are fine.")
    encoding_format: Literal["float", "base64"] = "float"


class InputsWeight(_Strict):
    """Inputs per request and how often: batch clients send 4 or 16 texts at once."""

    n: int = Field(..., ge=1, le=4096)
    weight: float = Field(1.0, gt=0)


class Payload(_Strict):
    """What each request carries."""

    corpora: list[str] = Field(
        default_factory=lambda: ["en_short", "en_medium", "zh_short", "zh_medium"],
        description="Corpus names under scenarios/corpora/ (file stem), sampled uniformly per input.",
    )
    inputs_per_request: list[InputsWeight] = Field(
        default_factory=lambda: [InputsWeight.model_validate({"n": 1, "weight": 1.0})],
        description="Weighted distribution of inputs per request.",
    )
    validation_mix: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of requests drawn from the edge cases (short Chinese phrase, 5,000-char "
        "text, empty input that must fail); recorded under a 'validation:' endpoint label.",
    )
    repeat_fraction: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of inputs sent verbatim from the corpus (so they repeat across requests); the "
        "rest carry a short unique tag, so a result cache on the target only hits what truly repeats.",
    )
    seed: int = Field(0, description="Seed for payload sampling, so runs send the same texts.")


class Step(_Strict):
    """One load step: users (closed loop) or an arrival rate (open loop), held for duration_s."""

    label: str = ""
    duration_s: float = Field(..., gt=0)
    warmup_s: float = Field(0.0, ge=0, description="Seconds at the start the analysis trims.")
    users: int | None = Field(None, ge=1, description="Concurrent users (closed loop).")
    spawn_rate: float | None = Field(None, gt=0, description="Users started per second; default all at once.")
    rate: float | None = Field(None, gt=0, description="Requests per second (open loop).")

    @model_validator(mode="after")
    def _warmup_fits(self) -> Step:
        if self.warmup_s >= self.duration_s:
            raise ValueError(
                f"warmup_s ({self.warmup_s}) must be shorter than duration_s ({self.duration_s})"
            )
        return self


class OpenLoop(_Strict):
    """Arrival process for open-loop scenarios."""

    arrival: Literal["constant", "poisson"] = "constant"
    max_in_flight: int = Field(256, ge=1, description="Requests beyond this many in flight are dropped.")
    lateness_tolerance_ms: float = Field(
        50.0, ge=0, description="A request starting later than this after its slot counts as late."
    )
    late_policy: Literal["send", "drop"] = Field(
        "send",
        description="send: send late requests anyway (latency_from_intended_ms shows it); drop: record as dropped.",
    )


class Slo(_Strict):
    """The service-level objective the analysis checks each step against."""

    p99_ms: float = Field(300.0, gt=0)
    error_budget_pct: float = Field(0.1, ge=0, le=100)


class Health(_Strict):
    """Thresholds the analysis flags when telemetry crosses them."""

    max_device_temp_c: float = 85.0
    max_device_mem_pct: float = 80.0
    max_error_rate_pct: float = 0.1
    max_mean_latency_ms: float = 300.0


class Scenario(_Strict):
    """A complete, validated load scenario."""

    name: str
    kind: ScenarioKind
    description: str = ""
    target: Target = Field(default_factory=lambda: Target.model_validate({}))
    payload: Payload = Field(default_factory=lambda: Payload.model_validate({}))
    steps: list[Step] = Field(..., min_length=1)
    open_loop: OpenLoop = Field(default_factory=lambda: OpenLoop.model_validate({}))
    slo: Slo = Field(default_factory=lambda: Slo.model_validate({}))
    health: Health = Field(default_factory=lambda: Health.model_validate({}))
    drain_s: float = Field(2.0, ge=0, description="Open loop: seconds to let in-flight requests finish.")
    profiles: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Named override sets (e.g. quick, full), applied with the same keys as --set.",
    )
    profile: str = Field("", description="The profile applied (written by the loader).")

    @model_validator(mode="after")
    def _steps_match_kind(self) -> Scenario:
        for i, step in enumerate(self.steps):
            if not step.label:
                step.label = f"{'rate' if self.is_open_loop else 'users'}={step.rate if self.is_open_loop else step.users}"
            if self.is_open_loop and step.rate is None:
                raise ValueError(
                    f"steps.{i}: open-loop scenarios need `rate` (requests per second) on every step"
                )
            if not self.is_open_loop and step.users is None:
                raise ValueError(f"steps.{i}: closed-loop scenarios ({self.kind}) need `users` on every step")
        return self

    @property
    def is_open_loop(self) -> bool:
        return self.kind == "openloop"

    @property
    def total_duration_s(self) -> float:
        return sum(s.duration_s for s in self.steps)

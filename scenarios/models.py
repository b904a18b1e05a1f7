"""Typed scenario configuration: every YAML file under scenarios/ is validated by these models once."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from scenarios.canary_models import Canary, Rollback
from scenarios.cost_models import Cost
from scenarios.until_models import Until

ScenarioKind = Literal["ramp", "openloop", "soak", "spike"]
SCENARIO_KINDS: tuple[str, ...] = ("ramp", "openloop", "soak", "spike")
# What each request asks of the target: dense embeddings, sparse (lexical) embeddings, or one query ranked
# against N documents.
Task = Literal["embed", "embed_sparse", "rerank"]
CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
# Validation context key: check that named files exist (set when a scenario is loaded for a run, not
# when a stored manifest is read back on another machine).
CHECK_FILES = "check_files"
# Error type of a step whose warm-up is not shorter than the step (the loader gathers them into one line).
WARMUP_TOO_LONG = "warmup_too_long"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def did_you_mean(word: str, choices: list[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or "" (the hint every unknown name gets)."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _ordered(low: int, high: int, where: str) -> None:
    """A {min, max} range's check, worded with the range's own dotted name."""
    if low > high:
        raise ValueError(f"{where}.min ({low}) must not exceed {where}.max ({high})")


class Target(_Strict):
    """Where the load goes."""

    base_url: str = Field("http://127.0.0.1:8086", description="Scheme, host and port; --host overrides it.")
    protocol: str = Field(
        "",
        description="Target protocol: openai, tei, kserve-v2, ollama, infinity, vllm, or `package.module:ATTR` "
        "naming a protocol object of your own; empty: detected by the pre-flight check (--protocol sets it).",
    )
    path: str = Field(
        "",
        description="Request path; empty: the protocol's path for payload.task, where the pre-flight check "
        "found the target's API (e.g. /v1/embeddings, /embeddings, /embed, /rerank).",
    )
    model: str = Field(
        "",
        description="Model id sent with each request; empty: the model the target serves (its model list or "
        "/info), else the reference service's all-MiniLM-L6-v2 (--model sets it).",
    )
    api_key_env: str = Field(
        "EMBEDPERF_TARGET_API_KEY",
        description="Environment variable holding the API key (sent as a Bearer token when set).",
    )
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout.")
    dimension: int | None = Field(None, gt=0, description="Embedding size of a target without /info.")
    info_path: str = Field(
        "",
        description="Service description endpoint recorded in the manifest; empty: the protocol's own "
        "(/info, /v2/models/{model}, ...). Targets without one are fine.",
    )
    encoding_format: Literal["float", "base64"] = "float"
    devices: list[int] = Field(
        default_factory=list,
        description="NPU/GPU indices (as npu-smi / NVML number them) that serve the target; empty: "
        "learnt from the target's /info, else from which devices are busy under load.",
    )
    agents: list[str] = Field(
        default_factory=list, description="`embedperf agent` URLs (http://host:9187) to pull telemetry from."
    )


class InputsWeight(_Strict):
    """Inputs per request and how often: batch clients send 4 or 16 texts at once."""

    n: int = Field(..., ge=1, le=4096)
    weight: float = Field(1.0, gt=0)


class Dataset(_Strict):
    """The user's own texts: a .jsonl (field), .csv (column), .parquet (column) or .txt (one per line)."""

    path: str = Field(
        ..., description="File with the texts; a relative path: beside the scenario file, else in the cwd."
    )
    field: str = Field("text", description="JSON field (.jsonl) or column (.csv, .parquet) holding the text.")


class TokenLengths(_Strict):
    """Synthetic texts whose token counts follow a distribution (per input)."""

    distribution: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    mean: float = Field(128.0, gt=0, description="Mean tokens per input (fixed: the length).")
    std: float = Field(0.0, ge=0, description="Standard deviation in tokens (normal, lognormal).")
    min: int = Field(1, ge=1, description="Shortest input in tokens (also the low end of uniform).")
    max: int = Field(512, ge=1, description="Longest input in tokens (also the high end of uniform).")
    tokenizer: str = Field(
        "auto",
        description="auto: the target's own tokenizer when /info names a local model directory, else the "
        "approximation; approx: always the approximation (WORDS_PER_TOKEN words per token); or a path "
        "to a local tokenizer directory.",
    )

    @model_validator(mode="after")
    def _range(self) -> TokenLengths:
        _ordered(self.min, self.max, "tokens")
        return self


class QualityProbes(_Strict):
    """A fraction of requests sends reference texts; their answers' cosine to fp32 is kept per row."""

    fraction: float = Field(0.05, ge=0.0, le=1.0, description="Fraction of requests that are quality probes.")
    reference: str = Field(
        ...,
        description="Reference set (Parquet: text, embedding) written by `embedperf precision --write-reference`; "
        "a relative path is looked up beside the scenario file, then in the working directory.",
    )
    min_cosine: float = Field(
        0.99, gt=0.0, le=1.0, description="Precision gate: a step with a lower mean probe cosine is flagged."
    )


class DocumentRange(_Strict):
    """Documents per rerank request, drawn uniformly from [min, max]."""

    min: int = Field(..., ge=1, le=4096)
    max: int = Field(..., ge=1, le=4096)

    @model_validator(mode="after")
    def _range(self) -> DocumentRange:
        _ordered(self.min, self.max, "rerank.documents")
        return self


class Rerank(_Strict):
    """One query (a corpus or dataset text) and N documents per request: from the same source, or from the
    token-length generator when payload.tokens is set."""

    documents: Annotated[int, Field(ge=1, le=4096)] | DocumentRange | list[InputsWeight] = Field(
        8, description="Documents per request: a number, {min, max} (uniform) or [{n, weight}, ...]"
    )


class Payload(_Strict):
    """What each request carries."""

    task: Task = Field(
        "embed",
        description="embed (dense vectors), embed_sparse (sparse vectors: TEI's /embed_sparse) or rerank "
        "(one query and payload.rerank.documents documents).",
    )
    rerank: Rerank | None = Field(None, description="The rerank shape (task rerank; defaults when left out).")
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
    dataset: Dataset | None = Field(
        None, description="Send the user's own texts (sampled with the seed) instead of the corpora."
    )
    tokens: TokenLengths | None = Field(
        None, description="Send synthetic texts with this token-length distribution instead of the corpora."
    )
    quality_probes: QualityProbes | None = Field(
        None, description="Mix in reference texts and record each answer's cosine to its fp32 embedding."
    )

    @field_validator("corpora")
    @classmethod
    def _corpora_exist(cls, names: list[str], info: ValidationInfo) -> list[str]:
        """A misspelt corpus fails when the scenario is loaded, not in every user at run time."""
        if not (info.context or {}).get(CHECK_FILES):
            return names
        available = sorted(p.stem for p in CORPORA_DIR.glob("*.txt"))
        for name in names:
            if name not in available:
                hint = did_you_mean(name, available)
                raise ValueError(f"unknown corpus {name!r}{hint}; available: {', '.join(available)}")
        return names

    @model_validator(mode="after")
    def _task_shape(self) -> Payload:
        """One text source; the rerank shape belongs to the rerank task; probes and edge cases are dense."""
        if self.dataset is not None and self.tokens is not None:
            raise ValueError("payload.dataset and payload.tokens are exclusive; choose one text source")
        if self.task == "rerank" and self.rerank is None:
            self.rerank = Rerank.model_validate({})
        if self.task != "rerank" and self.rerank is not None:
            raise ValueError(f"payload.rerank needs payload.task: rerank (the task is {self.task})")
        if self.task != "embed" and self.quality_probes is not None:
            raise ValueError(f"payload.quality_probes compare dense embeddings; task {self.task} has none")
        if self.task != "embed" and self.validation_mix > 0:
            raise ValueError(f"payload.validation_mix sends embedding edge cases; set it to 0 for task {self.task}")
        return self


class Step(_Strict):
    """One load step: users (closed loop) or an arrival rate (open loop), held for duration_s."""

    label: str = ""
    duration_s: float = Field(..., gt=0)
    warmup_s: float = Field(0.0, ge=0, description="Seconds at the start the analysis trims.")
    users: int | None = Field(None, ge=1, description="Concurrent users (closed loop).")
    spawn_rate: float | None = Field(None, gt=0, description="Users started per second; default all at once.")
    rate: float | None = Field(None, gt=0, description="Requests per second (open loop).")
    ramp_s: float = Field(
        0.0,
        ge=0,
        description="Open loop: ramp the rate linearly from the previous step's rate (0 for the first) "
        "to `rate` over the step's first ramp_s seconds.",
    )
    until: Until | None = Field(
        None,
        description="Stop the step once its P99 interval is narrow enough (scenarios/until_models.py); "
        "duration_s is then its longest time.",
    )

    @model_validator(mode="after")
    def _warmup_fits(self) -> Step:
        """A warm-up as long as the step leaves nothing to measure; the loader says so in one line."""
        if self.warmup_s >= self.duration_s:
            raise PydanticCustomError(
                WARMUP_TOO_LONG,
                "steps.warmup_s ({warmup_s} s) must be shorter than steps.duration_s ({duration_s} s)",
                {"warmup_s": f"{self.warmup_s:g}", "duration_s": f"{self.duration_s:g}"},
            )
        if self.until is not None and self.warmup_s + self.until.min_s > self.duration_s:
            raise ValueError(
                f"steps.until.min_s ({self.until.min_s:g} s) after the warm-up ({self.warmup_s:g} s) exceeds the "
                f"step's longest time, duration_s ({self.duration_s:g} s); lengthen duration_s or shorten min_s"
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
    overflow: Literal["drop", "queue"] = Field(
        "drop",
        description="When max_in_flight requests are out: drop records the new one as dropped; queue makes it "
        "wait on the client, its latency from the intended start including the wait (as wrk2 does).",
    )


class Search(_Strict):
    """`embedperf search`: probe open-loop rates for the highest one that meets the SLO. A probe's length
    includes its warm-up (repeats and confirming probes too); the drain of requests still in flight adds at
    most drain_s. The floor: the lowest rate at which a probe of max_probe_s collects min_ok_requests."""

    enabled: bool = Field(False, description="Run the search instead of the scenario's steps.")
    start_rate: float = Field(
        25.0, gt=0, description="First probe's rate (requests per second); not below the floor (refused)."
    )
    min_rate: float | None = Field(
        None, gt=0, description="Stop bracketing downwards at this rate (default and never below: the floor)."
    )
    max_rate: float = Field(100_000.0, gt=0, description="Stop bracketing upwards above this rate.")
    growth: float = Field(2.0, gt=1, description="Bracketing multiplies (divides) the rate by this.")
    precision: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Stop bisecting when (top - low) / top is within this (top: the lowest rate above the "
        "answer that failed or whose P99 interval contains the SLO).",
    )
    min_ok_requests: int = Field(
        1000,
        ge=10,
        description="Ok requests a probe aims for (stable P99); at least the number that can bound a P99 "
        "at the search's confidence (368 at 95%), else the search refuses to start.",
    )
    min_probe_s: float = Field(5.0, gt=0, description="Shortest probe.")
    max_probe_s: float = Field(60.0, gt=0, description="Longest probe.")
    warmup_s: float = Field(1.0, ge=0, description="Seconds at the start of a probe left out of its verdict.")
    confirm_factor: float = Field(
        2.0, ge=1, description="The confirming probe is this many times longer (at most max_probe_s)."
    )
    confidence: float = Field(0.95, gt=0.5, lt=1, description="Confidence of the P99 interval.")
    goodput_tolerance: float = Field(
        0.05, ge=0, lt=1, description="A probe fails when its goodput falls this far below the offered rate."
    )
    max_duration_s: float = Field(600.0, gt=0, description="Longest search; it ends with its current answer.")

    @model_validator(mode="after")
    def _rates(self) -> Search:
        if not (self.min_rate or 0.0) <= self.start_rate <= self.max_rate:
            raise ValueError("search needs min_rate <= start_rate <= max_rate")
        if self.min_probe_s > self.max_probe_s:
            raise ValueError("search.min_probe_s must not exceed search.max_probe_s")
        if self.warmup_s >= self.min_probe_s:
            raise ValueError("search.warmup_s must be shorter than search.min_probe_s")
        return self


class Slo(_Strict):
    """The service-level objective the analysis checks each step against."""

    p99_ms: float = Field(300.0, gt=0)
    error_budget_pct: float = Field(0.1, ge=0, le=100)
    target_qps: float | None = Field(
        None, gt=0, description="Load to serve; the report plans devices for it (20-30% headroom)."
    )


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
    search: Search = Field(default_factory=lambda: Search.model_validate({}))
    slo: Slo = Field(default_factory=lambda: Slo.model_validate({}))
    health: Health = Field(default_factory=lambda: Health.model_validate({}))
    canary: Canary = Field(default_factory=lambda: Canary.model_validate({}))
    rollback: Rollback = Field(default_factory=lambda: Rollback.model_validate({}))
    cost: Cost | None = Field(
        None, description="Prices the report costs each step and the capacity plan at; none: no cost figures."
    )
    drain_s: float = Field(2.0, ge=0, description="Open loop: seconds to let in-flight requests finish.")
    profiles: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Named override sets (e.g. quick, full), applied with the same keys as --set.",
    )
    profile: str = Field("", description="The profile applied (written by the loader).")

    @model_validator(mode="after")
    def _steps_match_kind(self) -> Scenario:
        for i, step in enumerate(self.steps):
            load = step.rate if self.is_open_loop else step.users
            if not step.label:
                step.label = f"{'rate' if self.is_open_loop else 'users'}={load}"
            if self.is_open_loop and step.rate is None:
                raise ValueError(f"steps.{i}: open-loop scenarios need `rate` (requests per second) on every step")
            if not self.is_open_loop and step.users is None:
                raise ValueError(f"steps.{i}: closed-loop scenarios ({self.kind}) need `users` on every step")
            if step.ramp_s >= step.duration_s:
                raise ValueError(f"steps.{i}: ramp_s ({step.ramp_s}) must be shorter than duration_s")
        if self.search.enabled and not self.is_open_loop:
            raise ValueError(f"search runs open-loop probes; scenario kind {self.kind!r} is closed loop")
        if self.canary.enabled and len(self.steps) != len(self.canary.stages_pct):
            raise ValueError(
                f"a canary runs one step per stage ({len(self.canary.stages_pct)} stages, {len(self.steps)} "
                "steps); start it with `embedperf canary`, which sets the steps"
            )
        return self

    @property
    def is_open_loop(self) -> bool:
        return self.kind == "openloop"

    @property
    def total_duration_s(self) -> float:
        return sum(s.duration_s for s in self.steps)

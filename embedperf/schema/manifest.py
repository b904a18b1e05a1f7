"""manifest.json: what ran, against what, where and with which collectors (typed, validated on read)."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from embedperf.schema.tables import SCHEMA_VERSION
from embedperf.schema.upgrade import upgrade_v1
from scenarios.models import Health, Scenario, Slo, Target


class _Strict(BaseModel):
    """A record embedperf writes itself: an unknown key is a writer's bug, refused on read."""

    model_config = ConfigDict(extra="forbid")


class StepEnding(_Strict):
    """Why an adaptive step (scenario steps.until) ended, and the P99 interval it had then."""

    reason: Literal["converged", "max_time"]
    target_rel_width: float = Field(description="The steps.until.p99_rel_width it aimed for.")
    n_ok: int = Field(0, description="Ok answers after the warm-up that the decision saw.")
    p99_ms: float | None = None
    p99_ci_low_ms: float | None = Field(default=None, description="None: too few answers to bound it.")
    p99_ci_high_ms: float | None = Field(default=None, description="None: too few answers to bound it.")
    rel_width: float | None = Field(default=None, description="(high - low) / P99; None while an end is unbounded.")
    dependence: float = Field(
        default=1.0, description="How many answers counted as one independent answer (send-order batch means)."
    )

    @property
    def converged(self) -> bool:
        return self.reason == "converged"


class StageRecord(_Strict):
    """Real boundaries of one load stage, as it happened (not as planned)."""

    index: int
    label: str
    users: int | None = Field(default=None, description="Closed loop: the users it held.")
    rate: float | None = Field(default=None, description="Open loop: the rate it offered, in requests per second.")
    start_unix_s: float
    end_unix_s: float | None = None
    warmup_s: float = Field(0.0, description="Seconds at the start of the stage the analysis trims.")
    ending: StepEnding | None = Field(default=None, description="Adaptive steps only: why the step ended.")


class CollectorStatus(_Strict):
    """Outcome of one telemetry source during the run."""

    name: str
    status: Literal["ok", "skipped", "failed", "partial"]
    reason: str = ""
    samples: int = 0
    events: list[dict[str, Any]] = Field(default_factory=list)


class GeneratorCpu(_Strict):
    """The load generator's own CPU: on a shared host it competes with the service."""

    mean_pct: float | None = None
    max_pct: float | None = None
    p95_pct: float | None = None
    saturated: bool = False
    threshold_pct: float = 90.0
    note: str = ""


class GeneratorWorker(_Strict):
    """One worker of a distributed load generator, as the master saw it (loadgen.lifecycle.worker_book)."""

    worker: str = Field(description="The worker's name in the request rows' `worker` column.")
    rows: int = Field(0, description="Request rows it forwarded.")
    first_seen_unix_s: float | None = None
    last_seen_unix_s: float | None = None
    final_rows: bool = Field(False, description="It sent its last rows when the run ended.")
    missing_s: float = Field(0.0, description="Seconds of the run's stages it was missing (no batch for 3 s).")
    missing: list[tuple[float, float]] = Field(
        default_factory=list,
        description="[from, to] unix seconds of each silence (to: when it came back or the end).",
    )


class HostInfo(_Strict):
    """The machine that generated the load; comparisons warn when it differs between runs."""

    hostname: str = ""
    os: str = ""
    machine: str = ""
    cpu_model: str = ""
    cpu_cores_logical: int | None = None
    cpu_cores_physical: int | None = None
    mem_total_mb: int | None = None
    accelerators: list[str] = Field(default_factory=list, description="Visible accelerator tools.")


class ServiceDevice(BaseModel):
    """One device the target runs inference on, as its /info lists it."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["npu", "cuda", "cpu"]
    index: int = 0
    name: str = ""


class ServiceInfo(BaseModel):
    """The target's /info: the fields embedperf reads are typed, anything else a target says is kept."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    dimension: int | None = None
    device: str | None = None
    precision: str | None = None
    config: dict[str, Any] | None = None
    devices: list[ServiceDevice] = Field(default_factory=list)
    fallback_model: str | None = Field(
        default=None,
        description="The lighter model the target degrades to under load; answers it produced name it.",
    )

    @field_validator("devices", mode="before")
    @classmethod
    def _known_devices(cls, value: object) -> object:
        """Any target may answer /info: entries embedperf cannot read are left out, never fatal."""
        if not isinstance(value, list):
            return []
        return [d for d in value if isinstance(d, dict) and d.get("kind") in ("npu", "cuda", "cpu")]

    @field_validator("fallback_model", mode="before")
    @classmethod
    def _model_id(cls, value: object) -> object:
        """A fallback named other than by a string id cannot match an answer's header: treated as none."""
        return value if isinstance(value, str) and value else None

    def accelerator_indices(self) -> list[int]:
        return sorted({d.index for d in self.devices if d.kind in ("npu", "cuda")})


ServingRule = Literal["explicit", "service_info", "busy", "none"]


class ServingDevices(_Strict):
    """Which accelerator indices serve the target and by which rule (explicit > /info > busy under load)."""

    rule: ServingRule = "none"
    indices: list[int] = Field(default_factory=list, description="NPU/GPU indices as npu-smi / NVML number them.")


class AgentRecord(_Strict):
    """One `embedperf agent` the run pulled telemetry from, with the clock offset to it."""

    url: str
    host: str = ""
    status: Literal["ok", "partial", "failed"] = "ok"
    reason: str = ""
    samples: int = 0
    offset_s: float | None = Field(
        None, description="Agent clock minus generator clock (mean of start and end estimates)."
    )
    offset_uncertainty_s: float | None = Field(
        None, description="Half the round trip of the best probe, plus the drift between start and end."
    )
    missing_s: list[int] = Field(
        default_factory=list, description="Whole seconds of the run (unix, generator clock) without samples."
    )


class Manifest(BaseModel):
    """manifest.json. Unknown keys are kept (extra="allow") so older readers tolerate newer writers. scenario,
    target, slo, health, host and service_info are the typed models the writer used, so a reader gets back
    exactly what was written. Build new manifests with `new_manifest`."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    kind: Literal["closed_loop", "open_loop", "synthetic"] = "closed_loop"
    scenario: Scenario
    target: Target = Field(description="The scenario's target with base_url the host actually loaded.")
    target_url: str = ""
    label: str = ""
    service_info: ServiceInfo | None = None
    host: HostInfo = Field(default_factory=HostInfo)
    versions: dict[str, str] = Field(default_factory=dict)
    git: dict[str, Any] = Field(default_factory=dict)
    start_unix_s: float | None = None
    end_unix_s: float | None = None
    stages: list[StageRecord] = Field(default_factory=list)
    collectors: list[CollectorStatus] = Field(default_factory=list)
    generator_cpu: GeneratorCpu = Field(default_factory=GeneratorCpu)
    slo: Slo
    health: Health
    serving_devices: ServingDevices = Field(default_factory=ServingDevices)
    agents: list[AgentRecord] = Field(default_factory=list)
    complete: bool = Field(False, description="False while running or after a crash.")
    notes: list[str] = Field(default_factory=list)
    workers: list[GeneratorWorker] = Field(
        default_factory=list,
        description="Distributed runs: every load-generator worker, its rows and missing time.",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if int(data.get("schema_version", SCHEMA_VERSION)) < 2:
            data = upgrade_v1(data, HostInfo)
        embedded = isinstance(data.get("scenario"), dict | Scenario)
        if embedded and not {"target", "slo", "health"} <= data.keys():
            scenario = Scenario.model_validate(data["scenario"])
            data = {"slo": scenario.slo, "health": scenario.health, **data}
            if "target" not in data:
                base_url, path = _split_target_url(str(data.get("target_url") or ""), scenario.target)
                data["target"] = scenario.target.model_copy(update={"base_url": base_url, "path": path})
        return data


def _split_target_url(url: str, target: Target) -> tuple[str, str]:
    if not url:
        return target.base_url, target.path
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}", parts.path or target.path


def new_manifest(
    run_id: str,
    scenario: Scenario,
    base_url: str,
    *,
    service_info: dict[str, Any] | ServiceInfo | None = None,
    host: HostInfo | None = None,
    serving_devices: ServingDevices | None = None,
    **fields: Any,
) -> Manifest:
    """The writer's one way to start a manifest: slo, health and target come from the scenario itself."""
    base = base_url.rstrip("/")
    info = ServiceInfo.model_validate(service_info) if isinstance(service_info, dict) else service_info
    return Manifest(
        run_id=run_id,
        kind=fields.pop("kind", "open_loop" if scenario.is_open_loop else "closed_loop"),
        scenario=scenario,
        target=scenario.target.model_copy(update={"base_url": base}),
        target_url=base + scenario.target.path,
        service_info=info,
        host=host or HostInfo(),
        slo=scenario.slo,
        health=scenario.health,
        serving_devices=serving_devices or ServingDevices(),
        **fields,
    )

"""`embedperf verify`'s one configuration section: every threshold and length of the four layers.

Defaults are the seeds' go-live values (cosine >= 0.99 / 0.999, P99 <= 300 ms, error rate <= 0.1%, device
utilisation >= 90% under load, temperature < 85 C, device memory < 80%) and a one-hour soak. A YAML file's
`verify:` section (`--config FILE`) overrides them, and flags override the file; the result is validated once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from embedperf.errors import ConfigError, problems

CONFIG_SECTION = "verify"
LAYER_NUMBERS: tuple[int, ...] = (1, 2, 3, 4)


class VerifyThresholds(BaseModel):
    """What each layer measures and the limits it judges against (units in the names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Layer 1: function and precision
    min_cosine: float = Field(0.99, gt=0, le=1, description="Mean cosine to the fp32 reference: below fails.")
    strict_cosine: float = Field(0.999, gt=0, le=1, description="Strict-use bar: below warns or fails.")
    strict_action: Literal["warn", "fail"] = Field("warn", description="Below strict_cosine: warn or fail.")
    dimension: int | None = Field(None, gt=0, description="Embedding size (default: /info or the reference).")
    # Layer 2: performance and utilisation
    slo_p99_ms: float = Field(300.0, gt=0, description="P99 objective of the capacity search, ms.")
    error_budget_pct: float = Field(0.1, ge=0, le=100, description="Error budget of a probe and the soak, %.")
    target_qps: float | None = Field(
        None, gt=0, description="Rate to carry at the SLO; without it capacity is shown, not judged."
    )
    headroom_pct: float = Field(
        25.0, ge=0, le=400, description="Capacity above target_qps that passes; between the two warns."
    )
    max_p99_p50_ratio: float = Field(5.0, gt=1, description="Tail at the answer: P99 / P50 above this fails.")
    max_p999_p99_ratio: float = Field(3.0, gt=1, description="P99.9 / P99 at the answer above this warns.")
    min_device_util_pct: float = Field(
        90.0, ge=0, le=100, description="Device utilisation at the answer: below fails (0 turns it off)."
    )
    max_mem_bw_util_pct: float = Field(90.0, gt=0, le=100, description="Saturated memory bandwidth, %.")
    max_temp_c: float = Field(85.0, gt=0, description="Device temperature limit, C.")
    max_device_mem_pct: float = Field(80.0, gt=0, le=100, description="Device memory use limit, % of total.")
    throttle_temp_rise_c: float = Field(5.0, gt=0, description="Throttling: temperature rising this much ...")
    throttle_clock_drop_pct: float = Field(5.0, gt=0, lt=100, description="... as the clock falls this much.")
    search_scenario: str = Field("query", description="Open-loop scenario the capacity search sends.")
    search_start_rate: float | None = Field(
        None, gt=0, description="First probe's rate (default: target_qps, else the scenario's)."
    )
    search_max_rate: float | None = Field(
        None, gt=0, description="Highest rate probed (default: target_qps + headroom, else the scenario's)."
    )
    search_min_ok_requests: int = Field(
        400, ge=368, description="Ok answers per probe (368 bound a P99 at 95%)."
    )
    search_max_probe_s: float = Field(30.0, gt=1, description="Longest probe, s.")
    search_precision: float = Field(0.1, gt=0, lt=1, description="Bracket width the search stops at.")
    search_max_duration_s: float = Field(600.0, gt=0, description="Stop the search after this long, s.")
    # Layer 3: stability
    soak_s: float = Field(3600.0, gt=0, description="Length of the soak, s (hours for a release).")
    soak_windows: int = Field(6, ge=2, le=1000, description="Equal windows judging the soak (first vs last).")
    soak_users: int | None = Field(
        None, ge=1, description="Closed-loop users of the soak (default: the scenario's)."
    )
    soak_scenario: str = Field("soak", description="Scenario whose payload the soak sends.")
    soak_warmup_s: float = Field(0.0, ge=0, description="Start of the first window left out, s.")
    max_p99_drift_ratio: float = Field(1.5, gt=1, description="Last / first window's P99 above this: drift.")
    max_memory_growth_pct: float = Field(
        10.0, gt=0, description="Service RSS growth, first to last window, above this is a leak, %."
    )
    max_restarts: int = Field(0, ge=0, description="Restarts (a new pid or start time in /info) allowed.")
    max_oom_splits: int = Field(0, ge=0, description="Batches split on running out of device memory allowed.")
    max_device_errors: int = Field(0, ge=0, description="Batches failed with a device error allowed.")
    max_fallback_share_pct: float = Field(
        0.0, ge=0, le=100, description="Share of answers a fallback model may serve during the soak, %."
    )
    # Layer 4: operational readiness
    health_path: str = Field("/health", description="Liveness endpoint.")
    ready_path: str = Field("/ready", description="Readiness endpoint.")
    metrics_path: str = Field("/metrics", description="Prometheus exposition of the target.")
    info_path: str = Field("/info", description="Service description (pid, start time, dimension).")
    startup_timeout_s: float = Field(600.0, gt=0, description="--start-cmd: longest wait to be ready, s.")
    startup_poll_s: float = Field(0.05, gt=0, le=1, description="--start-cmd: probe interval, s.")
    prometheus_lookback_s: float = Field(
        86400.0, gt=0, description="Every shipped alert must have fired within this window before now, s."
    )

    @model_validator(mode="after")
    def _consistent(self) -> VerifyThresholds:
        if self.strict_cosine < self.min_cosine:
            raise ValueError(f"strict_cosine {self.strict_cosine} is below min_cosine {self.min_cosine}")
        if self.soak_warmup_s >= self.soak_s / self.soak_windows:
            raise ValueError(
                f"soak_warmup_s {self.soak_warmup_s:g} s must be shorter than one soak window "
                f"({self.soak_s / self.soak_windows:g} s = soak_s / soak_windows)"
            )
        return self

    @property
    def soak_window_s(self) -> float:
        return self.soak_s / self.soak_windows

    @property
    def capacity_needed_qps(self) -> float | None:
        """target_qps with the headroom on top: what passes layer 2 outright."""
        return None if self.target_qps is None else self.target_qps * (1.0 + self.headroom_pct / 100.0)


def read_config_section(path: Path) -> dict[str, Any]:
    """The `verify:` mapping of a YAML file (a scenario-style file may hold other sections beside it)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read --config {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: not valid YAML: {exc}") from exc
    section = raw.get(CONFIG_SECTION) if isinstance(raw, dict) else None
    if not isinstance(section, dict):
        raise ConfigError(
            f"--config {path} has no `{CONFIG_SECTION}:` mapping; write e.g. `{CONFIG_SECTION}: {{soak_s: 7200}}`"
        )
    return section


def resolve_thresholds(config: Path | None, flags: dict[str, Any]) -> VerifyThresholds:
    """Defaults < the file's `verify:` section < flags (None flags are left out); ConfigError lists every problem."""
    values: dict[str, Any] = read_config_section(config) if config is not None else {}
    values.update({key: value for key, value in flags.items() if value is not None})
    try:
        return VerifyThresholds.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"invalid verify settings: {problems(exc, 'verify')}") from exc


def parse_layers(text: str) -> tuple[int, ...]:
    """`1,4` -> (1, 4): the layers to run; the others are reported as skipped."""
    try:
        numbers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        numbers = []
    if not numbers or any(n not in LAYER_NUMBERS for n in numbers):
        raise ConfigError(f"--layers {text!r}: give layer numbers 1-4 separated by commas, e.g. --layers 1,4")
    return tuple(numbers)

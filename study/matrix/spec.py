"""The optimisation matrix file (scenarios/optimizations.yaml): typed, validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from embedperf.errors import ConfigError
from scenarios.models import Search, did_you_mean

ServiceValue = bool | int | float | str


class Configuration(BaseModel):
    """One named service configuration: a delta over the matrix baseline."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Short name, used in run labels and tables.")
    description: str = Field("", description="What this configuration changes, in words.")
    service: dict[str, ServiceValue] = Field(
        default_factory=dict, description="Settings over the baseline (`embedperf serve` flags, _ or -)."
    )
    scenario_overrides: dict[str, str] = Field(
        default_factory=dict, description="Scenario overrides of this one only (e.g. a payload mix)."
    )
    redis: bool = Field(False, description="Start a private redis-server, the service's --cache.")

    @field_validator("name")
    @classmethod
    def _name_is_a_label(cls, value: str) -> str:
        if not value or not all(c.isalnum() or c in "-_." for c in value):
            raise ValueError(f"name {value!r} must be letters, digits, '-', '_' or '.'")
        return value


class MatrixSpec(BaseModel):
    """The whole study: one scenario, a baseline, and the configurations to measure against it."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = Field("ramp", description="Scenario name or YAML path run for every configuration.")
    profile: Literal["quick", "full"] | None = Field("quick", description="Scenario profile.")
    baseline: dict[str, ServiceValue] = Field(default_factory=dict, description="Settings all start from.")
    configurations: list[Configuration] = Field(description="The first is the baseline of the others.")
    precision_profile: Literal["standard", "strict"] = Field("standard", description="Gate profile.")
    slo_p99_ms: float | None = Field(None, description="SLO for 'QPS at the SLO' (default: the scenario's).")
    error_budget_pct: float | None = Field(None, description="Error budget, % (default: the scenario's).")
    scenario_overrides: dict[str, str] = Field(default_factory=dict, description="Overrides for every one.")
    measure: Literal["steps", "search"] = Field(
        "steps",
        description="steps: run the scenario's load steps; search: an `embedperf search` per configuration "
        "(open-loop scenario), configurations ranked by the highest rate meeting the SLO.",
    )
    search: dict[str, float | int] = Field(
        default_factory=dict,
        description="Search settings for measure: search (fields of the scenario's `search` section, "
        "e.g. precision: 0.2, max_duration_s: 300).",
    )

    @field_validator("search")
    @classmethod
    def _search_fields(cls, value: dict[str, float | int]) -> dict[str, float | int]:
        valid = [f for f in Search.model_fields if f != "enabled"]
        if unknown := [k for k in value if k not in valid]:
            hint = did_you_mean(unknown[0], valid)
            raise ValueError(f"unknown search setting {unknown[0]!r}{hint}; valid: {', '.join(valid)}")
        return value

    def search_overrides(self) -> dict[str, str]:
        """Scenario overrides that turn a run into a capacity search (empty for measure: steps)."""
        if self.measure != "search":
            return {}
        return {"search.enabled": "true", **{f"search.{k}": str(v) for k, v in self.search.items()}}

    @field_validator("configurations")
    @classmethod
    def _unique_names(cls, value: list[Configuration]) -> list[Configuration]:
        if len(value) < 2:
            raise ValueError("a matrix needs a baseline and at least one other configuration")
        names = [c.name for c in value]
        if dupes := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"configuration names must be unique; repeated: {', '.join(dupes)}")
        return value

    def service_settings(self, config: Configuration) -> dict[str, ServiceValue]:
        merged = {k.replace("-", "_"): v for k, v in self.baseline.items()}
        merged.update({k.replace("-", "_"): v for k, v in config.service.items()})
        return merged

    def select(self, names: list[str]) -> MatrixSpec:
        """A copy with only `names` (the baseline is always kept first)."""
        known = {c.name: c for c in self.configurations}
        if unknown := [n for n in names if n not in known]:
            raise ConfigError(f"unknown configuration(s) {', '.join(unknown)}; valid: {', '.join(known)}")
        keep = [self.configurations[0]] + [known[n] for n in names if n != self.configurations[0].name]
        return self.model_copy(update={"configurations": keep})


def service_args(settings: dict[str, ServiceValue]) -> list[str]:
    """`{"batching": False, "max_batch_size": 16}` -> `["--no-batching", "--max-batch-size", "16"]`."""
    args: list[str] = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + key.replace("_", "-"))
        else:
            args += [flag, str(value)]
    return args


def load_matrix_spec(path: Path) -> MatrixSpec:
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} not found; the shipped matrix is scenarios/optimizations.yaml") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc
    try:
        return MatrixSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: " + "; ".join(_explain(err) for err in exc.errors())) from exc


def _explain(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        model = Configuration if "configurations" in [str(p) for p in err["loc"]] else MatrixSpec
        valid = list(model.model_fields)
        hint = did_you_mean(str(err["loc"][-1]), valid)
        return f"unknown field {where!r}{hint}; valid fields: {', '.join(valid)}"
    return f"{where}: {err['msg']}"

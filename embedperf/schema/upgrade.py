"""Reading version-1 manifests: the renamed fields and the scenario they embedded, brought to the current form."""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import BaseModel, ValidationError

from embedperf.schema.tables import SCHEMA_VERSION
from scenarios.models import SCENARIO_KINDS, Health, Scenario, Slo


def _v1_scenario(raw: dict[str, Any], stages: list[Any], kind: str | None) -> dict[str, Any]:
    """A version-1 scenario that does not validate (hand-built, synthetic) rebuilt from its name and stages."""
    with contextlib.suppress(ValidationError):
        return Scenario.model_validate(raw).model_dump(mode="json")
    fallback_kind = "openloop" if kind == "open_loop" else "ramp"
    scenario_kind = raw.get("kind") if raw.get("kind") in SCENARIO_KINDS else fallback_kind
    load_key, load_default = ("rate", 1.0) if scenario_kind == "openloop" else ("users", 1)
    steps = []
    for stage in stages:
        st = dict(stage) if isinstance(stage, dict) else stage.model_dump()
        end = st.get("end_unix_s")
        duration_s = max(float(end) - float(st["start_unix_s"]), 1.0) if end is not None else 1.0
        warmup_s = min(float(st.get("warmup_s") or 0.0), duration_s / 2)
        step = {"label": st.get("label", ""), "duration_s": duration_s, "warmup_s": warmup_s}
        steps.append(step | {load_key: st.get(load_key) or load_default})
    steps = steps or [{"duration_s": 1.0, load_key: load_default}]
    return {"name": str(raw.get("name") or "unknown"), "kind": scenario_kind, "steps": steps}


# A version-1 name -> the current one; _V1_SCALES: the factor a value takes where the unit changed too.
_V1_HEALTH_KEYS: dict[str, str] = {
    "temp_max_c": "max_device_temp_c",
    "mem_max_pct": "max_device_mem_pct",
    "error_rate_max": "max_error_rate_pct",
    "mean_latency_max_ms": "max_mean_latency_ms",
}
_V1_HOST_KEYS = {"cpu": "cpu_model", "cores": "cpu_cores_logical", "memory_gb": "mem_total_mb"}
_V1_SCALES: dict[str, float] = {"error_rate_max": 100.0, "memory_gb": 1024.0}  # a fraction -> %, GB -> MB


def _renamed(raw: dict[str, Any], renames: dict[str, str], model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in renames:
            scale = _V1_SCALES.get(key)
            out.setdefault(renames[key], value * scale if scale and isinstance(value, int | float) else value)
        elif key in model.model_fields:
            out[key] = value
    return out


def upgrade_v1(raw: dict[str, Any], host_model: type[BaseModel]) -> dict[str, Any]:
    """Version-1 manifest -> version 2: typed scenario/slo/health/host/target, the reader-side names mapped.
    `host_model` is the manifest's HostInfo, whose field names a v1 host record keeps."""
    data = dict(raw)
    scenario_raw: dict[str, Any] = data["scenario"] if isinstance(data.get("scenario"), dict) else {}
    scenario = _v1_scenario(scenario_raw, list(data.get("stages") or []), data.get("kind"))
    slo = dict(data.get("slo") or scenario.get("slo") or {})
    if "error_budget" in slo:  # v1 readers' name: a fraction, not a percentage
        slo.setdefault("error_budget_pct", float(slo.pop("error_budget")) * 100.0)
    health = data.get("health") or scenario.get("health") or {}
    scenario["slo"] = {k: v for k, v in slo.items() if k in Slo.model_fields}
    scenario["health"] = _renamed(dict(health), _V1_HEALTH_KEYS, Health)
    data["scenario"] = scenario
    data["slo"], data["health"] = scenario["slo"], scenario["health"]
    data["host"] = _renamed(dict(data.get("host") or {}), _V1_HOST_KEYS, host_model)
    data["schema_version"] = SCHEMA_VERSION
    return data

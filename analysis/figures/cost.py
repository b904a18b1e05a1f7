"""Money: what a step's work costs per million embeddings and input tokens, and what the device plan costs a month.

A step's hourly cost is that of the measured configuration while it served the step: its serving devices x
the device-hour price of their kind, one host x the host-hour price, and the serving devices' measured mean
power x the kWh price. Divided by the step's embeddings (or input tokens) per second it gives the cost per
million. A part whose price or measurement is missing is left out and named in the notes; no price at all,
no cost (nothing is invented: an unknown device kind gets no device price).

The plan's monthly cost provisions the plan's devices and one host per replica for HOURS_PER_MONTH hours,
and adds the energy of serving the target rate at the capacity step's joules per request.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from analysis.figures.capacity import DevicePlan
from analysis.model.steps import StepStats
from analysis.model.telemetry import TelemetryStats
from scenarios.cost_models import HOURS_PER_MONTH, Cost, known_sum, per_million

J_PER_KWH = 3.6e6


class StepCost(BaseModel):
    """One step's cost per hour (by part) and per million units of work; None where a part is unknown."""

    index: int
    hourly: float | None
    device_hourly: float | None = None
    host_hourly: float | None = None
    energy_hourly: float | None = None
    embeddings_per_s: float
    per_1m_embeddings: float | None = None
    per_1m_tokens: float | None = None


class PlanCost(BaseModel):
    """The device plan's monthly cost at the target rate with its headroom."""

    target_qps: float
    headroom: float
    devices: int
    replicas: int
    monthly: float = Field(description="The known parts' sum, in the prices' currency.")
    monthly_devices: float | None = None
    monthly_hosts: float | None = None
    monthly_energy: float | None = None
    upper_bound: bool = False  # read from a lower-bound capacity: "at most"
    uncertain: bool = False  # the capacity step's P99 interval never converged (adaptive, at its max time)


class RunCost(BaseModel):
    """Summary section `cost`: the prices used, where they came from, per-step costs and the plan's."""

    prices: Cost
    source: str  # scenario | options | scenario+options
    device_kind: str | None
    devices: int
    steps: list[StepCost]
    plan: PlanCost | None = None
    notes: list[str] = []

    def step(self, index: int) -> StepCost | None:
        return next((s for s in self.steps if s.index == index), None)


def step_cost(
    stats: StepStats, telemetry: TelemetryStats, n_embeddings: float, prices: Cost, kind: str | None,
    devices: int,
) -> StepCost:  # fmt: skip
    parts = prices.hourly_parts(kind, devices, telemetry.power_total_mean_w)
    hourly = known_sum(parts)
    emb_per_s = n_embeddings / stats.duration_s if stats.duration_s > 0 else 0.0
    return StepCost(
        index=stats.index, hourly=hourly, embeddings_per_s=emb_per_s,
        per_1m_embeddings=per_million(hourly, emb_per_s),
        per_1m_tokens=per_million(hourly, stats.tokens_per_s), **parts,
    )  # fmt: skip


def plan_cost(
    plan: DevicePlan, prices: Cost, kind: str | None, capacity_step: tuple[StepStats, TelemetryStats] | None,
    uncertain: bool = False,
) -> PlanCost | None:  # fmt: skip
    """Monthly cost of the plan (None when no price applies to it)."""
    device_price = prices.device_hour.get(kind) if kind is not None else None
    monthly_devices = plan.devices * device_price * HOURS_PER_MONTH if device_price is not None else None
    host_price = prices.host_hour
    monthly_hosts = plan.replicas * host_price * HOURS_PER_MONTH if host_price is not None else None
    monthly_energy = None
    if prices.energy_kwh is not None and capacity_step is not None:
        stats, telemetry = capacity_step
        if telemetry.power_total_mean_w is not None and stats.goodput_qps > 0:
            j_per_request = telemetry.power_total_mean_w / stats.goodput_qps
            kwh = j_per_request * plan.target_qps * HOURS_PER_MONTH * 3600.0 / J_PER_KWH
            monthly_energy = kwh * prices.energy_kwh
    monthly = known_sum({"devices": monthly_devices, "hosts": monthly_hosts, "energy": monthly_energy})
    if monthly is None:
        return None
    return PlanCost(
        target_qps=plan.target_qps, headroom=plan.headroom, devices=plan.devices, replicas=plan.replicas,
        monthly=monthly, monthly_devices=monthly_devices, monthly_hosts=monthly_hosts,
        monthly_energy=monthly_energy, upper_bound=plan.devices_upper_bound, uncertain=uncertain,
    )  # fmt: skip


def cost_notes(
    prices: Cost, kind: str | None, steps: list[StepCost], telemetry: list[TelemetryStats]
) -> list[str]:
    """Why a part of the cost is missing, one line each."""
    notes = []
    if prices.device_hour and (kind is None or kind not in prices.device_hour):
        unknown = "an unknown device kind (no serving-device telemetry or /info)"
        what = f"device kind {kind}" if kind else unknown
        notes.append(f"no device-hour price for {what}: device-hours are not costed")
    if prices.energy_kwh is not None and any(t.power_total_mean_w is None for t in telemetry):
        notes.append("no power measured for some steps: their energy is not costed")
    if any(s.hourly is None for s in steps):
        notes.append("steps without any applicable price have no cost")
    return notes

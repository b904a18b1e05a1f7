"""Prices a run's figures are costed at: the scenario's `cost` block, and the one costing arithmetic.

The prices travel with the scenario into manifest.scenario, so a report rebuilt from the run folder costs
its steps the same way. `embedperf report`, `capacity` and `compare` take the same options after the fact:
each price given there replaces that price of the run's block (and a run recorded without one gets one),
the others stay as recorded. No price anywhere: no cost figure at all.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Device kinds a price can name: the serving devices' own kind (npu-smi, NVML) or the host CPU.
DEVICE_KINDS: tuple[str, ...] = ("npu", "cuda", "cpu")
DEFAULT_CURRENCY = "USD"
HOURS_PER_MONTH = 730.0  # 365 x 24 / 12: the monthly figure cloud price lists use
PER_MILLION = 1e6


class Cost(BaseModel):
    """Prices per hour and per kWh; every field is optional, and a figure needs only the prices it uses."""

    model_config = ConfigDict(extra="forbid")

    device_hour: dict[str, float] = Field(
        default_factory=dict,
        description="Price of one device-hour per device kind (npu, cuda, cpu), e.g. {npu: 2.5, cuda: 3.0}.",
    )
    host_hour: float | None = Field(
        None, ge=0, description="Price of one host-hour (one host per replica of the measured service)."
    )
    energy_kwh: float | None = Field(
        None, ge=0, description="Price of one kWh, applied to the serving devices' measured power."
    )
    currency: str = Field(DEFAULT_CURRENCY, min_length=1, description="Currency label shown beside every price.")

    @field_validator("device_hour")
    @classmethod
    def _kinds(cls, prices: dict[str, float]) -> dict[str, float]:
        for kind, price in prices.items():
            if kind not in DEVICE_KINDS:
                raise ValueError(f"cost.device_hour: unknown device kind {kind!r}; use {', '.join(DEVICE_KINDS)}")
            if not math.isfinite(price) or price < 0:
                raise ValueError(f"cost.device_hour.{kind}: a price is a non-negative number, got {price}")
        return prices

    @property
    def priced(self) -> bool:
        """Whether any price is set (a block with only a currency costs nothing)."""
        return bool(self.device_hour) or self.host_hour is not None or self.energy_kwh is not None

    def hourly_parts(self, kind: str | None, devices: int, power_w: float | None) -> dict[str, float | None]:
        """Cost per hour of `devices` devices of `kind`, one host and `power_w` of device power; a part
        whose price (or power) is unknown is None. The analysis and the live export both cost with this."""
        device_price = self.device_hour.get(kind) if kind is not None else None
        return {
            "device_hourly": device_price * devices if device_price is not None else None,
            "host_hourly": self.host_hour,
            "energy_hourly": power_w / 1000.0 * self.energy_kwh
            if self.energy_kwh is not None and power_w is not None
            else None,
        }

    def over(self, base: Cost | None) -> Cost:
        """These prices laid over `base`'s: a price given here wins, the others stay."""
        if base is None:
            return self
        return Cost(
            device_hour={**base.device_hour, **self.device_hour},
            host_hour=self.host_hour if self.host_hour is not None else base.host_hour,
            energy_kwh=self.energy_kwh if self.energy_kwh is not None else base.energy_kwh,
            currency=self.currency if self.currency != DEFAULT_CURRENCY else base.currency,
        )


def device_kind(serving_devices: list[str], info_kinds: list[str], info_device: str | None) -> str | None:
    """npu, cuda or cpu: from the serving devices' telemetry names, else the kinds the target's /info lists,
    else its device string (cuda:0); None when nothing says."""
    names = " ".join(serving_devices)
    if "npu" in names:
        return "npu"
    if "gpu" in names:
        return "cuda"
    if info_kinds:
        return info_kinds[0]
    kind = (info_device or "").split(":", 1)[0].strip().lower()
    return kind if kind in DEVICE_KINDS else None


def known_sum(parts: dict[str, float | None]) -> float | None:
    """The sum of the known figures (None when none is known: nothing is invented)."""
    known = [p for p in parts.values() if p is not None]
    return sum(known) if known else None


def per_million(hourly: float | None, units_per_s: float | None) -> float | None:
    """Cost of a million units (embeddings, tokens) at `units_per_s` for `hourly` an hour."""
    if hourly is None or not units_per_s or units_per_s <= 0:
        return None
    return hourly / (units_per_s * 3600.0) * PER_MILLION

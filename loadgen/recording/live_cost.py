"""The live cost of each step of the run in progress (for the Prometheus export), priced as the report prices
it: the scenario's `cost` block from the manifest, the serving devices it names, the newest power samples. The
report uses the steady window and the mean power; this is the step so far."""

from __future__ import annotations

from dataclasses import dataclass

from embedperf.errors import RunFolderError
from embedperf.schema import read_manifest
from loadgen.recording.live import LiveRun, StepFigures
from scenarios.cost_models import Cost, device_kind, known_sum, per_million


@dataclass(frozen=True)
class LivePrices:
    """What the run's manifest says about costing it."""

    prices: Cost
    kind: str | None
    devices: int
    serving: frozenset[int]


def live_prices(live: LiveRun) -> LivePrices | None:
    """The run's prices and devices, None when its scenario has no price (or its manifest is not readable yet)."""
    try:
        manifest = read_manifest(live.folder)
    except (RunFolderError, OSError, ValueError):
        return None
    prices = manifest.scenario.cost
    if prices is None or not prices.priced:
        return None
    info = manifest.service_info
    serving = (
        manifest.serving_devices.indices or [d.index for d in info.devices if d.kind != "cpu"] if info else []
    )
    names = [name for name, _ in live.device_figures()]
    kind = device_kind(names, [d.kind for d in info.devices] if info else [], info.device if info else None)
    return LivePrices(prices=prices, kind=kind, devices=max(len(serving), 1), serving=frozenset(serving))


def _power_w(live: LiveRun, serving: frozenset[int]) -> float | None:
    samples = [(name, s.value) for (name, metric), s in live.device_figures().items() if metric == "power_w"]
    if serving:
        samples = [
            (n, v) for n, v in samples
            if any(n.endswith((f"npu{i}", f"gpu{i}")) or f"npu{i}." in n for i in serving)
        ]
    return sum(v for _, v in samples) if samples else None


def step_cost_per_1m(
    live: LiveRun, step: StepFigures, prices: LivePrices
) -> tuple[float | None, float | None]:
    """(cost per hour, cost per million embeddings) of the step so far."""
    power_w = _power_w(live, prices.serving)
    hourly = known_sum(prices.prices.hourly_parts(prices.kind, prices.devices, power_w))
    return hourly, per_million(hourly, step.embeddings_per_s)

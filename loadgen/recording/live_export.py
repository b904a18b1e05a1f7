"""Live per-step figures of the run in progress on a Prometheus endpoint (`--metrics-port`).

An existing Prometheus/Grafana can then watch a long soak while it runs. The figures are the same as the web
UI's live tab (loadgen.recording.live): read back from the run folder as rows are flushed, computed on each
scrape, exported from a registry of our own (never the process default). Each step's cost is priced as the
report prices it (the manifest's `cost` block, the serving devices it names), but over the step so far and
with the newest power samples, where the report takes the steady window and the mean power."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from embedperf.errors import RunFolderError
from embedperf.schema import read_manifest
from loadgen.recording.live import LATENCY_BUCKETS_MS, LiveRun, StepFigures
from scenarios.cost_models import Cost, device_kind, known_sum, per_million

METRIC_PREFIX = "embedperf"
# Each step's figures: (family, name after the prefix, labels beyond run_id/stage/stage_label, help).
STEP_METRICS: tuple[tuple[Any, str, tuple[str, ...], str], ...] = (
    (CounterMetricFamily, "requests", ("outcome",),
     "Requests recorded in the step (validation probes excluded)."),
    (CounterMetricFamily, "errors", ("kind",), "Failed requests by kind."),
    (GaugeMetricFamily, "goodput_rps", (), "Successful requests per second over the step so far."),
    (GaugeMetricFamily, "target_users", (), "The step's target concurrency."),
    (HistogramMetricFamily, "latency_ms", (), "Client-side latency of every request of the step, ms."),
    (GaugeMetricFamily, "server_stage_mean_ms", ("server_stage",),
     "Mean Server-Timing stage of successful requests in the step, ms."),
)
COST_METRICS: tuple[tuple[str, str], ...] = (  # gauges, with a currency label beyond the step's
    ("cost_per_1m_embeddings",
     "Cost of a million embeddings at the step's goodput so far (the scenario's prices)."),
    ("cost_per_hour",
     "Cost per hour of the serving devices, one host and their energy (the scenario's prices)."),
)


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
    serving = (manifest.serving_devices.indices or [d.index for d in info.devices if d.kind != "cpu"] if info else [])
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


def step_cost_per_1m(live: LiveRun, step: StepFigures, prices: LivePrices) -> tuple[float | None, float | None]:
    """(cost per hour, cost per million embeddings) of the step so far."""
    power_w = _power_w(live, prices.serving)
    hourly = known_sum(prices.prices.hourly_parts(prices.kind, prices.devices, power_w))
    return hourly, per_million(hourly, step.embeddings_per_s)


class LiveRunCollector(Collector):
    """Exports the run `live_run()` returns (None between runs: nothing is exported)."""

    def __init__(self, live_run: Callable[[], LiveRun | None]) -> None:
        self.live_run = live_run

    def collect(self) -> Iterator[Metric]:
        live = self.live_run()
        if live is None:
            return
        live.refresh()
        run_id = live.folder.run_id
        labels = ["run_id", "stage", "stage_label"]
        requests, errors, goodput, users, latency, server = (
            family(f"{METRIC_PREFIX}_{name}", help_text, labels=[*labels, *extra])
            for family, name, extra, help_text in STEP_METRICS
        )
        for step in live.steps.values():
            values = [run_id, str(step.index), step.label]
            requests.add_metric([*values, "ok"], step.ok)
            requests.add_metric([*values, "error"], step.errors)
            for kind, count in step.errors_by_kind.items():
                errors.add_metric([*values, kind], count)
            goodput.add_metric(values, step.goodput_rps)
            if step.target_users is not None:
                users.add_metric(values, step.target_users)
            cumulative = itertools.accumulate(step.latency_bucket_counts)
            bounds = [f"{bound:g}" for bound in LATENCY_BUCKETS_MS] + ["+Inf"]
            latency.add_metric(values, list(zip(bounds, cumulative, strict=True)), step.latency_sum_ms)
            for stage, mean_ms in step.server_mean_ms().items():
                server.add_metric([*values, stage], mean_ms)
        yield from (requests, errors, goodput, users, latency, server)
        yield from self._cost(live, labels)
        device = GaugeMetricFamily(
            f"{METRIC_PREFIX}_device_figure",
            "Newest telemetry sample of the serving devices (or host CPU and service busy fraction).",
            labels=["run_id", "device", "metric", "source"],
        )
        for (name, metric), sample in live.device_figures().items():
            device.add_metric([run_id, name, metric, sample.source], sample.value)
        yield device

    def _cost(self, live: LiveRun, labels: list[str]) -> Iterator[Metric]:
        """Cost per million embeddings and per hour of each step, only when the run's scenario has prices."""
        prices = live_prices(live)
        if prices is None:
            return
        per_1m, hourly = (
            GaugeMetricFamily(f"{METRIC_PREFIX}_{name}", help_text, labels=[*labels, "currency"])
            for name, help_text in COST_METRICS
        )
        for step in live.steps.values():
            values = [live.folder.run_id, str(step.index), step.label, prices.prices.currency]
            per_hour, per_million = step_cost_per_1m(live, step, prices)
            if per_hour is not None:
                hourly.add_metric(values, per_hour)
            if per_million is not None:
                per_1m.add_metric(values, per_million)
        yield from (per_1m, hourly)


class LiveExporter:
    """The HTTP endpoint; `port=0` takes a free port (printed, and kept in `.port`)."""

    def __init__(self, live_run: Callable[[], LiveRun | None], host: str, port: int) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(LiveRunCollector(live_run))
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self._server: Any = None

    def start(self) -> None:
        self._server, _ = start_http_server(self.requested_port, addr=self.host, registry=self.registry)
        self.port = int(self._server.server_address[1])
        print(f"live metrics: http://{self.host}:{self.port}/metrics", flush=True)

"""Service source: scrape a Prometheus text endpoint every tick and turn its counters into rates.

Rates are taken between consecutive successful scrapes over their real elapsed time; a counter
that goes down was reset (process restart) and its new value is the increase. A target that stops
answering leaves a gap, recorded as an event with its length when it comes back.

The names are the reference service's by default; another server's own names replace them per canonical
metric (`--service-metric queue_depth=te_queue_size`; the load run passes its target protocol's).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collectors.base import Reading, Source
from collectors.config import CollectorConfig

DEVICE = "service"
CACHE_HITS = "embedperf_cache_hits_total"
CACHE_MISSES = "embedperf_cache_misses_total"
# canonical metric -> the Prometheus sample it is read from: a gauge (queue_depth), a counter whose rate it
# is (busy_frac: seconds busy per second, request_rate_qps, tokens_per_s), or a histogram or summary whose
# mean over the interval it is (batch_size_mean: NAME_sum / NAME_count)
DEFAULT_NAMES: Mapping[str, str] = dict(
    queue_depth="embedperf_queue_depth",
    busy_frac="embedperf_compute_seconds_total",
    request_rate_qps="embedperf_requests_total",
    tokens_per_s="embedperf_tokens_total",
    batch_size_mean="embedperf_batch_size",
)
GAUGES = frozenset({"queue_depth"})
RATES = frozenset({"busy_frac", "request_rate_qps", "tokens_per_s"})
MEANS = frozenset({"batch_size_mean"})


def parse_metrics_text(text: str) -> dict[str, float]:
    """Sample name -> value summed over label sets (e.g. requests_total over every status)."""
    # Histogram buckets are most of a /metrics page and never used here: drop them before parsing.
    text = "\n".join(line for line in text.splitlines() if "_bucket{" not in line) + "\n"
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket") or sample.name.endswith("_created"):
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


@dataclass(frozen=True)
class Scrape:
    mono_s: float
    values: Mapping[str, float]


def counter_increase(previous: float, current: float) -> float:
    """Increase of a counter between two scrapes; after a reset the current value is the increase."""
    return current - previous if current >= previous else current


def gauges(scrape: Scrape, names: Mapping[str, str] = DEFAULT_NAMES) -> dict[str, float]:
    """The canonical gauges one scrape holds (queue_depth)."""
    return {metric: scrape.values[names[metric]] for metric in GAUGES if names.get(metric) in scrape.values}


def rates(prev: Scrape, cur: Scrape, names: Mapping[str, str] = DEFAULT_NAMES) -> dict[str, float]:
    """Canonical service metrics between two scrapes; a metric the service does not expose is absent."""
    dt = cur.mono_s - prev.mono_s
    out = gauges(cur, names)
    if dt <= 0:
        return out

    def increase(name: str) -> float | None:
        if name not in cur.values:  # the parser names a counter's sample NAME_total, however it was exposed
            name = f"{name}_total"
        if name in prev.values and name in cur.values:
            return counter_increase(prev.values[name], cur.values[name])
        return None

    for metric in RATES & names.keys():
        if (rate_inc := increase(names[metric])) is not None:
            out[metric] = rate_inc / dt

    for metric in MEANS & names.keys():
        total, count = increase(f"{names[metric]}_sum"), increase(f"{names[metric]}_count")
        if total is not None and count:
            out[metric] = total / count
    hits, misses = increase(CACHE_HITS), increase(CACHE_MISSES)
    lookups = (hits or 0.0) + (misses or 0.0)
    if hits is not None and lookups > 0:
        out["cache_hit_ratio"] = hits / lookups
    return out


class ServiceMetricsSource(Source):
    name = "service"

    def __init__(self, config: CollectorConfig) -> None:
        super().__init__()
        self.url = config.metrics_url
        self.names: Mapping[str, str] = {**DEFAULT_NAMES, **config.service_metrics}
        self.timeout_s = max(0.2, min(2.0, config.interval_s * 0.8))
        self._client: httpx.Client | None = None
        self._previous: Scrape | None = None
        self._gap_since_unix_s: float | None = None

    def probe(self) -> str | None:
        return None if self.url else "no --service-url given"

    def start(self) -> None:
        self._client = httpx.Client(timeout=self.timeout_s)

    def sample(self, ts_unix_s: float) -> Iterable[Reading]:
        assert self._client is not None
        try:
            response = self._client.get(self.url or "").raise_for_status()
            scrape = Scrape(time.monotonic(), parse_metrics_text(response.text))
        except (httpx.HTTPError, ValueError) as exc:
            if self._gap_since_unix_s is None:
                self._gap_since_unix_s = ts_unix_s
                self.status.event("gap", f"{self.url} not answering: {type(exc).__name__}: {exc}", DEVICE)
            self._previous = None  # never compute a rate across a gap
            return ()
        if self._gap_since_unix_s is not None:
            gap_s = ts_unix_s - self._gap_since_unix_s
            self.status.event("recovered", f"{self.url} answering again after {gap_s:.0f} s", DEVICE)
            self._gap_since_unix_s = None
        previous, self._previous = self._previous, scrape
        found = gauges(scrape, self.names) if previous is None else rates(previous, scrape, self.names)
        return [(DEVICE, metric, value) for metric, value in found.items()]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

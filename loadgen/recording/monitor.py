"""The generator's own CPU, sampled at 1 Hz in a greenlet: a saturated generator invalidates latencies."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable
from typing import Any

import gevent
import psutil

from embedperf.schema import GeneratorCpu

SAMPLE_INTERVAL_S = 1.0
# Container allocations between young collections during the load (Python's default 700): the recorder
# keeps every row until its next flush, so at the default the collector runs every few hundred requests.
YOUNG_GC_THRESHOLD = 10_000
SATURATION_THRESHOLD_PCT = 90.0  # of one core: a gevent generator process runs on one core


def settle_heap() -> None:
    """Freeze what the generator holds before the load (imports, scenario, corpora, tokenizer), so the cyclic
    collector stops re-scanning ~100k objects that live for the whole run; collected first, as Locust does."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_GC_THRESHOLD), middle, old)


class CpuMonitor:
    """Samples this process's CPU percent (100 = one full core) once a second."""

    def __init__(self, worker: str, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.worker = worker
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self._proc = psutil.Process()
        self._greenlet: gevent.Greenlet | None = None
        self._sent = 0

    def start(self) -> None:
        self._proc.cpu_percent(None)  # prime: the first call always returns 0
        self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            gevent.sleep(self.interval_s)
            self.samples.append(
                {"worker": self.worker, "ts_unix_s": time.time(), "cpu_pct": self._proc.cpu_percent(None)}
            )

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def take_new(self) -> list[dict[str, Any]]:
        """Samples not handed out yet (workers forward them to the master)."""
        new = self.samples[self._sent :]
        self._sent = len(self.samples)
        return new


def summarise(samples: Iterable[dict[str, Any]], threshold_pct: float = SATURATION_THRESHOLD_PCT) -> GeneratorCpu:
    """Mean/max/P95 over every process; saturated when any process's P95 crosses the threshold."""
    by_worker: dict[str, list[float]] = {}
    for s in samples:
        by_worker.setdefault(str(s["worker"]), []).append(float(s["cpu_pct"]))
    values = [v for vs in by_worker.values() for v in vs]
    if not values:
        return GeneratorCpu(threshold_pct=threshold_pct, note="no CPU samples (run shorter than 1 s)")
    saturated_workers = [w for w, vs in by_worker.items() if _p95(vs) > threshold_pct]
    note = "" if not saturated_workers else (
        f"generator-bound: P95 CPU above {threshold_pct:.0f}% of one core on {', '.join(saturated_workers)}; "
        "latencies include generator queueing; add workers (--processes N)"
    )
    return GeneratorCpu(
        mean_pct=round(sum(values) / len(values), 2), max_pct=round(max(values), 2),
        p95_pct=round(_p95(values), 2), saturated=bool(saturated_workers), threshold_pct=threshold_pct,
        note=note,
    )


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]

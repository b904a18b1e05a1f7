"""A c-server FIFO queue with Poisson arrivals (M/D/c, M/G/c): the ground truth for capacity searches.

Tests use it twice: as the target a probe measures (latency from each request's intended start,
counted the way loadgen.shaping.search's tap counts a probe's window) and, with long runs, as the oracle
for the rate at which the true P99 reaches the SLO.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from decisions.search.state import ProbeMeasurement


@dataclass(frozen=True)
class Queue:
    """c workers serving one FIFO queue; service time fixed (sigma 0) or lognormal around its median."""

    workers: int
    service_ms: float
    sigma: float = 0.0  # lognormal shape; 0 = deterministic (M/D/c)

    @property
    def saturation_rps(self) -> float:
        mean_s = self.service_ms / 1000.0 * math.exp(self.sigma**2 / 2.0)
        return self.workers / mean_s

    def _draws(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """n unit-rate exponential gaps and n service times (s), from one seed."""
        rng = np.random.default_rng(seed)
        gaps = rng.exponential(1.0, n)
        service = np.full(n, self.service_ms / 1000.0)
        if self.sigma > 0.0:
            service *= np.exp(rng.normal(0.0, self.sigma, n))
        return gaps, service

    def _serve(self, arrivals_s: np.ndarray, service_s: np.ndarray) -> np.ndarray:
        """Completion times: each arrival takes the earliest free worker, in arrival order (FIFO)."""
        free_at = [0.0] * self.workers  # a heap of the instants each worker is next free
        done: list[float] = []
        append, take_worker = done.append, heapq.heapreplace  # the hot loop of every search test: no lookups
        for t, s in zip(arrivals_s.tolist(), service_s.tolist(), strict=True):
            free = free_at[0]
            end = (t if t > free else free) + s
            take_worker(free_at, end)
            append(end)
        return np.array(done)

    def run(self, rate: float, duration_s: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Arrival and completion times (s) of a run from an empty system (Poisson arrivals)."""
        n = int(rate * duration_s * 1.2 + 10 * math.sqrt(rate * duration_s) + 10)
        gaps, service = self._draws(n, seed)
        arrivals = np.cumsum(gaps) / rate
        keep = arrivals < duration_s
        assert not keep[-1], "drew too few arrivals"
        return arrivals[keep], self._serve(arrivals[keep], service[keep])

    def p99_ms(self, rate: float, n_requests: int, seed: int) -> float:
        """The P99 latency of a long run of n_requests (its first tenth left out as warm-up)."""
        gaps, service = self._draws(n_requests, seed)  # the same draws at every rate: common random numbers
        arrivals = np.cumsum(gaps) / rate
        latency_ms = (self._serve(arrivals, service) - arrivals)[n_requests // 10 :] * 1000.0
        return float(np.quantile(latency_ms, 0.99, method="inverted_cdf"))

    def limit_rps(self, slo_ms: float, n_requests: int = 200_000, seed: int = 7, tol: float = 0.002) -> float:
        """The rate whose long-run P99 equals slo_ms, by bisection."""
        lo, hi = 0.02 * self.saturation_rps, 0.999 * self.saturation_rps
        assert self.p99_ms(lo, n_requests, seed) < slo_ms < self.p99_ms(hi, n_requests, seed)
        while (hi - lo) / hi > tol:
            mid = (lo + hi) / 2.0
            if self.p99_ms(mid, n_requests, seed) <= slo_ms:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2.0

    def probe(
        self, rate: float, duration_s: float, warmup_s: float, seed: int, drain_s: float = 2.0
    ) -> ProbeMeasurement:
        """What one probe measures: requests intended after the warm-up, goodput within the window,
        and answers later than the drain counted as unfinished (loadgen.shaping.search.ProbeTap's rules)."""
        arrivals, done = self.run(rate, duration_s, seed)
        steady = arrivals >= warmup_s
        cutoff_s = duration_s + drain_s
        finished = steady & (done <= cutoff_s)
        unfinished = steady & (done > cutoff_s)
        return ProbeMeasurement(
            rate=rate,
            duration_s=duration_s - warmup_s,
            scheduled=int(steady.sum()),
            ok=int(finished.sum()),
            errors=0,
            ok_done=int((finished & (done <= duration_s)).sum()),
            ok_latency_ms=((done - arrivals)[finished] * 1000.0).tolist(),
            unfinished_ms=((cutoff_s - arrivals[unfinished]) * 1000.0).tolist(),
        )

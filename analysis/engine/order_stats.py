"""Exact percentiles and bootstrap intervals from order statistics: what lets DuckDB answer for numpy.

DuckDB's `quantile_cont` interpolates with another rounding than numpy's "linear" method, so DuckDB
is asked for order statistics only (`quantile_disc` at a rank's midpoint returns exactly the k-th
smallest value) and they are interpolated here with numpy's own arithmetic: the percentiles equal the
in-memory ones bit for bit. The p99 bootstrap interval needs order statistics, not the sample (the
resampled percentile of a sorted sample is an order statistic, see analysis/figures/bootstrap.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from analysis.figures.bootstrap import interval, lerp, resampled_ranks, rng_for


def linear_ranks(n: int, q_pct: float) -> tuple[int, int, float]:
    """numpy's "linear" method: the two ranks a percentile interpolates between, and the weight."""
    virtual = (n - 1) * (q_pct / 100.0)
    if virtual >= n - 1:
        return n - 1, n - 1, 0.0
    lo = math.floor(virtual)
    return lo, lo + 1, virtual - lo


OrderStats = Callable[[Sequence[int]], dict[int, float]]


def exact_percentiles(n: int, pcts: Sequence[float], order_stats: OrderStats) -> list[float]:
    ranks = [linear_ranks(n, q) for q in pcts]
    values = order_stats(sorted({r for lo, hi, _ in ranks for r in (lo, hi)}))
    return [lerp(values[lo], values[hi], t) for lo, hi, t in ranks]  # numpy's own arithmetic, bit for bit


def bootstrap_ranks(n: int, q_pct: float, n_boot: int, seed: int, dependence: float = 1.0) -> list[int]:
    """The order statistics bootstrap_percentile_ci will ask for (to fetch them with others in one pass)."""
    if n == 0:
        return []
    lo, hi, _ = resampled_ranks(n, q_pct, n_boot, rng_for(seed), dependence)
    return sorted(set(lo.tolist()) | set(hi.tolist()))


def bootstrap_percentile_ci(
    n: int, q_pct: float, order_stats: OrderStats, n_boot: int, seed: int, dependence: float = 1.0
) -> tuple[float | None, float | None]:
    """The interval of analysis.figures.bootstrap.resampled_percentiles without the sample: the same draws,
    only the order statistics drawn."""
    if n == 0:
        return None, None
    lo, hi, weight = resampled_ranks(n, q_pct, n_boot, rng_for(seed), dependence)
    values = order_stats(bootstrap_ranks(n, q_pct, n_boot, seed, dependence))
    low = np.array([values[int(i)] for i in lo], dtype=np.float64)
    high = np.array([values[int(i)] for i in hi], dtype=np.float64)
    return interval(lerp(low, high, weight))

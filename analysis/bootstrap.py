"""Seeded, vectorised bootstrap confidence intervals for percentiles, throughput and their differences.

Percentiles use the exact order-statistic form of the bootstrap: the k-th smallest of n draws with
replacement from a sorted sample is `sorted[floor(U * n)]` with U ~ Beta(k, n - k + 1), so B resampled
percentiles cost B draws instead of B * n. This is the ordinary nonparametric bootstrap of the
nearest-rank percentile, computed without materialising the resamples.
"""

from __future__ import annotations

import numpy as np

DEFAULT_N_BOOT = 2000
DEFAULT_SEED = 0
CI_LEVEL = 0.95


def rng_for(seed: int = DEFAULT_SEED) -> np.random.Generator:
    return np.random.default_rng(seed)


def resampled_percentiles(
    sorted_values: np.ndarray, q_pct: float, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """B bootstrap replicates of the q-th percentile of an ascending sample (empty sample -> NaNs)."""
    n = len(sorted_values)
    if n == 0:
        return np.full(n_boot, np.nan)
    k = min(max(int(np.ceil(q_pct / 100.0 * n)), 1), n)
    u = rng.beta(k, n - k + 1, size=n_boot)
    idx = np.minimum((u * n).astype(np.int64), n - 1)
    return np.asarray(sorted_values[idx], dtype=np.float64)


def resampled_means(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """B bootstrap replicates of the mean (used for per-second throughput)."""
    n = len(values)
    if n == 0:
        return np.full(n_boot, np.nan)
    chunk = max(1, 4_000_000 // n)
    out = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = values[idx].mean(axis=1)
    return out


def interval(replicates: np.ndarray, level: float = CI_LEVEL) -> tuple[float | None, float | None]:
    """Percentile interval of bootstrap replicates; (None, None) when there are none."""
    finite = replicates[np.isfinite(replicates)]
    if len(finite) == 0:
        return None, None
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


def percentile_ci(
    sorted_values: np.ndarray, q_pct: float, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> tuple[float | None, float | None]:
    return interval(resampled_percentiles(sorted_values, q_pct, n_boot, rng_for(seed)))

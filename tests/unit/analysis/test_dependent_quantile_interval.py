"""The P99 interval of correlated latencies: the dependence factor (send-order batch means) and its coverage.

Latencies under load come in bursts; an interval that takes them as independent is too narrow. These
tests draw series whose true P99 is known and hold the interval to its stated 95% coverage.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from decisions.search.stats import (
    DEPENDENCE_BATCHES,
    QUANTILE,
    batch_sizes,
    dependence_factor,
    ordered_dependence_factor,
    quantile_ci,
)

PHI = 0.95  # AR(1) coefficient: each latency remembers 95% of the last one's excess
SCALE = 0.1  # latency = 100 ms * exp(SCALE * x): log-normal marginal, median 100 ms


def ar1_latencies_ms(n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.empty(n)
    x[0] = rng.normal() / math.sqrt(1 - PHI**2)  # drawn from the stationary law
    shocks = rng.normal(size=n)
    for i in range(1, n):
        x[i] = PHI * x[i - 1] + shocks[i]
    return 100.0 * np.exp(SCALE * x)


TRUE_P99_MS = 100.0 * math.exp(SCALE * norm.ppf(QUANTILE) / math.sqrt(1 - PHI**2))


def test_batches_are_cut_as_sql_ntile_cuts_them() -> None:
    assert batch_sizes(45, 20) == [3] * 5 + [2] * 15
    assert sum(batch_sizes(7001)) == 7001 and len(batch_sizes(7001)) == DEPENDENCE_BATCHES
    assert batch_sizes(3) == [1, 1, 1]


def test_independent_latencies_have_a_factor_near_one_and_bursts_their_burst_size() -> None:
    rng = np.random.default_rng(0)
    factors = [ordered_dependence_factor(rng.lognormal(3.0, 0.3, 4000), QUANTILE) for _ in range(40)]
    assert 1.0 <= float(np.median(factors)) < 1.5
    # each latency repeated 25 times in a row: 25 answers carry what one does
    bursts = np.repeat(rng.lognormal(3.0, 0.3, 400), 25)
    assert 12.0 < ordered_dependence_factor(bursts, QUANTILE) < 50.0
    assert dependence_factor([0, 0], [10, 10]) == 1.0  # nothing above: nothing to measure
    assert dependence_factor([5], [10]) == 1.0  # one batch: no spread to measure


def test_a_factor_of_one_is_the_independent_interval_and_a_larger_one_widens_it() -> None:
    values = np.random.default_rng(2).lognormal(3.0, 0.3, 3000).tolist()
    assert quantile_ci(values, QUANTILE, 0.95, 1.0) == quantile_ci(values, QUANTILE, 0.95)
    _, low1, high1 = quantile_ci(values, QUANTILE, 0.95)
    _, low4, high4 = quantile_ci(values, QUANTILE, 0.95, 4.0)
    assert low4 < low1 and high4 > high1
    _, _, unbounded = quantile_ci(values, QUANTILE, 0.95, 30.0)  # 100 independent answers bound no P99
    assert unbounded == math.inf


def test_correlated_latencies_keep_the_stated_coverage_only_with_the_factor() -> None:
    rng = np.random.default_rng(11)
    independent_hits = dependent_hits = 0
    replicates = 150
    for _ in range(replicates):
        latencies = ar1_latencies_ms(4000, rng)
        _, low, high = quantile_ci(latencies.tolist(), QUANTILE, 0.95)
        independent_hits += low <= TRUE_P99_MS <= high
        factor = ordered_dependence_factor(latencies.tolist(), QUANTILE)
        _, low, high = quantile_ci(latencies.tolist(), QUANTILE, 0.95, factor)
        dependent_hits += low <= TRUE_P99_MS <= high
    assert independent_hits / replicates < 0.6  # taken as independent: far below 95%
    assert dependent_hits / replicates >= 0.85

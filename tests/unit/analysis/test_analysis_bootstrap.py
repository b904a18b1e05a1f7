"""The order-statistic bootstrap matches a brute-force bootstrap of the same percentile."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.bootstrap import interval, resampled_means, resampled_percentiles


def test_matches_brute_force_bootstrap() -> None:
    rng = np.random.default_rng(0)
    sample = np.sort(rng.lognormal(3.0, 0.5, 2000))
    fast = resampled_percentiles(sample, 99.0, 4000, np.random.default_rng(1))
    k = int(np.ceil(0.99 * len(sample)))
    idx = np.random.default_rng(2).integers(0, len(sample), size=(1000, len(sample)))
    brute = np.sort(sample[idx], axis=1)[:, k - 1]
    assert np.median(fast) == pytest.approx(np.median(brute), rel=0.02)
    assert np.std(fast) == pytest.approx(np.std(brute), rel=0.2)


def test_seeded_and_empty() -> None:
    sample = np.arange(100.0)
    a = resampled_percentiles(sample, 50.0, 10, np.random.default_rng(5))
    b = resampled_percentiles(sample, 50.0, 10, np.random.default_rng(5))
    assert np.array_equal(a, b)
    assert interval(resampled_percentiles(np.array([]), 50.0, 10, np.random.default_rng(0))) == (None, None)


def test_mean_interval_covers_truth() -> None:
    values = np.random.default_rng(4).normal(100.0, 10.0, 400)
    low, high = interval(resampled_means(values, 2000, np.random.default_rng(6)))
    assert low is not None and high is not None
    assert low < values.mean() < high
    assert high - low == pytest.approx(2 * 1.96 * 10.0 / 20.0, rel=0.25)

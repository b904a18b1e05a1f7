"""The order-statistic bootstrap matches a brute-force bootstrap of the same percentile."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.figures.bootstrap import interval, resampled_means, resampled_percentiles


@pytest.mark.parametrize("q_pct", [50.0, 99.0])
def test_matches_brute_force_bootstrap_of_the_linear_percentile(q_pct: float) -> None:
    """Replicates are np.percentile(resample, q) (linear), the estimator of the reported P99."""
    rng = np.random.default_rng(0)
    sample = np.sort(rng.lognormal(3.0, 0.5, 2000))
    fast = resampled_percentiles(sample, q_pct, 4000, np.random.default_rng(1))
    idx = np.random.default_rng(2).integers(0, len(sample), size=(2000, len(sample)))
    brute = np.percentile(sample[idx], q_pct, axis=1)
    assert np.median(fast) == pytest.approx(np.median(brute), rel=0.01)
    assert np.std(fast) == pytest.approx(np.std(brute), rel=0.15)


def test_interval_is_centred_on_the_linear_estimate_not_nearest_rank() -> None:
    """Where linear and nearest-rank P99 differ most (a gap between two ranks), the replicates follow linear."""
    sample = np.sort(np.concatenate([np.arange(1.0, 149.0), [5_000.0, 10_000.0]]))
    linear = float(np.percentile(sample, 99.0))
    nearest = float(np.percentile(sample, 99.0, method="inverted_cdf"))
    assert nearest - linear > 10.0
    fast = resampled_percentiles(sample, 99.0, 20_000, np.random.default_rng(3))
    idx = np.random.default_rng(4).integers(0, len(sample), size=(20_000, len(sample)))
    brute = np.percentile(sample[idx], 99.0, axis=1)
    assert np.mean(fast) == pytest.approx(np.mean(brute), rel=0.05)
    nearest_brute = np.percentile(sample[idx], 99.0, axis=1, method="inverted_cdf")
    assert abs(np.mean(fast) - np.mean(brute)) < abs(np.mean(nearest_brute) - np.mean(brute)) / 4


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

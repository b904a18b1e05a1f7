"""Service /metrics -> rates: label sums, histogram means, counter resets, absent metrics."""

from __future__ import annotations

import pytest

from collectors.service_metrics import Scrape, counter_increase, parse_metrics_text, rates

TEXT = """# TYPE embedperf_requests_total counter
embedperf_requests_total{status="200"} 90
embedperf_requests_total{status="429"} 10
# TYPE embedperf_compute_seconds_total counter
embedperf_compute_seconds_total 5.0
# TYPE embedperf_queue_depth gauge
embedperf_queue_depth 3
# TYPE embedperf_batch_size histogram
embedperf_batch_size_bucket{le="8.0"} 4
embedperf_batch_size_bucket{le="+Inf"} 10
embedperf_batch_size_sum 80
embedperf_batch_size_count 10
"""


def test_parse_sums_label_sets_and_skips_buckets() -> None:
    values = parse_metrics_text(TEXT)
    assert values["embedperf_requests_total"] == 100
    assert values["embedperf_batch_size_count"] == 10
    assert not any(k.endswith("_bucket") for k in values)


def test_rates_between_scrapes() -> None:
    prev = Scrape(10.0, parse_metrics_text(TEXT))
    cur_values = dict(prev.values)
    cur_values.update(
        {
            "embedperf_requests_total": 150,
            "embedperf_compute_seconds_total": 5.8,
            "embedperf_batch_size_sum": 180,
            "embedperf_batch_size_count": 20,
            "embedperf_queue_depth": 7,
        }
    )
    out = rates(prev, Scrape(12.0, cur_values))
    assert out["request_rate_qps"] == pytest.approx(25.0)
    assert out["busy_frac"] == pytest.approx(0.4)
    assert out["batch_size_mean"] == pytest.approx(10.0)
    assert out["queue_depth"] == 7
    assert "tokens_per_s" not in out and "cache_hit_ratio" not in out  # not exposed: absent, not 0


def test_counter_reset_counts_the_new_value_as_increase() -> None:
    assert counter_increase(1000.0, 30.0) == 30.0
    prev = Scrape(0.0, {"embedperf_requests_total": 1000.0})
    assert rates(prev, Scrape(1.0, {"embedperf_requests_total": 30.0}))["request_rate_qps"] == 30.0


def test_cache_ratio_and_no_batches() -> None:
    prev = Scrape(
        0.0,
        {
            "embedperf_cache_hits_total": 0.0,
            "embedperf_cache_misses_total": 0.0,
            "embedperf_batch_size_sum": 5.0,
            "embedperf_batch_size_count": 1.0,
        },
    )
    cur = Scrape(
        1.0,
        {
            "embedperf_cache_hits_total": 3.0,
            "embedperf_cache_misses_total": 1.0,
            "embedperf_batch_size_sum": 5.0,
            "embedperf_batch_size_count": 1.0,
        },
    )
    out = rates(prev, cur)
    assert out["cache_hit_ratio"] == 0.75
    assert "batch_size_mean" not in out  # no batch in the window: no mean

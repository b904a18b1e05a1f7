"""Service /metrics -> rates: label sums, histogram means, counter resets, absent metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.cli import config_from_args
from collectors.service_metrics import (
    DEFAULT_NAMES,
    Scrape,
    counter_increase,
    gauges,
    parse_metrics_text,
    rates,
)
from embedperf.errors import ConfigError

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


def test_another_servers_names_replace_the_reference_services() -> None:
    """TEI's names (its exporter writes counters without _total; the parser adds it) read as the canonical
    metrics once mapped; the reference service's names are then not looked for."""
    tei = {
        "queue_depth": "te_queue_size",
        "batch_size_mean": "te_batch_next_size",
        "request_rate_qps": "te_request_success",
    }
    names = {**DEFAULT_NAMES, **tei}

    def scrape(t_s: float, successes: int, batches: int, inputs: int, queued: int) -> Scrape:
        text = (
            f'# TYPE te_request_success counter\nte_request_success{{method="batch"}} {successes}\n\n'
            f"# TYPE te_queue_size gauge\nte_queue_size {queued}\n\n"
            f'# TYPE te_batch_next_size histogram\nte_batch_next_size_bucket{{le="+Inf"}} {batches}\n'
            f"te_batch_next_size_sum {inputs}\nte_batch_next_size_count {batches}\n"
        )
        return Scrape(t_s, parse_metrics_text(text))

    out = rates(scrape(10.0, 100, 40, 80, 0), scrape(12.0, 160, 60, 140, 7), names)
    assert out == {"queue_depth": 7.0, "request_rate_qps": 30.0, "batch_size_mean": 3.0}
    assert gauges(scrape(0.0, 1, 1, 1, 5), names) == {"queue_depth": 5.0}
    # with the reference service's names, none of TEI's is read
    assert rates(scrape(10.0, 100, 40, 80, 0), scrape(12.0, 160, 60, 140, 7)) == {}


def test_service_metric_options_are_validated(tmp_path: Path) -> None:
    args = ["--out", str(tmp_path), "--service-url", "http://127.0.0.1:1"]
    config = config_from_args([*args, "--service-metric", "queue_depth=te_queue_size"])
    assert config.service_metrics == {"queue_depth": "te_queue_size"}
    with pytest.raises(ConfigError, match="unknown service metric"):
        config_from_args([*args, "--service-metric", "queue_len=te_queue_size"])
    with pytest.raises(ConfigError, match="CANONICAL=NAME"):
        config_from_args([*args, "--service-metric", "queue_depth"])

"""The gate grammar and its threshold semantics."""

from __future__ import annotations

import pytest

from analysis.compare.gate import parse_gate
from embedperf.errors import ConfigError


def test_parses_relative_and_absolute_rules() -> None:
    p99, qps, err = parse_gate("p99_ms:+5%, qps:-3%,error_rate:+0.1")
    assert (p99.metric, p99.sign, p99.threshold, p99.relative) == ("p99_ms", 1, 5.0, True)
    assert (qps.sign, qps.relative) == (-1, True)
    assert (err.metric, err.relative, err.threshold) == ("error_rate", False, 0.1)


def test_threshold_semantics() -> None:
    p99, qps, err = parse_gate("p99_ms:+5%,qps:-3%,error_rate:+0.1")
    assert p99.crossed(diff=6.0, rel=0.06) and not p99.crossed(diff=4.0, rel=0.04)
    assert not p99.crossed(diff=-50.0, rel=-0.5)
    assert qps.crossed(diff=-5.0, rel=-0.05) and not qps.crossed(diff=10.0, rel=0.10)
    assert err.crossed(diff=0.002, rel=None)  # +0.2 percentage points
    assert not err.crossed(diff=0.0005, rel=None)  # +0.05 pp


@pytest.mark.parametrize("spec", ["p99_ms:5%", "latency:+5%", "p99_ms+5%", "", "qps:-x%"])
def test_rejects_bad_rules(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_gate(spec)

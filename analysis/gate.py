"""The comparison gate: a small grammar of per-metric thresholds for CI pipelines.

    GATE    := RULE ("," RULE)*
    RULE    := METRIC ":" SIGN NUMBER ["%"]
    SIGN    := "+" (fail when the metric rises by more than NUMBER) | "-" (fails when it falls by more)
    "%"     := NUMBER is relative to the baseline; without it NUMBER is absolute in the metric's unit,
               except error_rate, whose absolute unit is percentage points (error_rate:+0.1 = +0.1 pp).

A rule fails at a step (or overall) when the point estimate of the change crosses the threshold AND
the change's 95% confidence interval excludes zero: noise alone never fails a build.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from embedperf.errors import ConfigError

GATE_METRICS: dict[str, str] = {
    "qps": "requests per second",
    "p50_ms": "median latency",
    "p95_ms": "95th percentile latency",
    "p99_ms": "99th percentile latency",
    "error_rate": "share of failed requests (absolute unit: percentage points)",
    "device_util_pct": "mean device utilisation",
    "service_cpu_pct": "mean service CPU",
    "mem_used_mb": "mean device memory used",
}
_RULE_RE = re.compile(r"^\s*([a-z0-9_]+)\s*:\s*([+-])\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


class GateRule(BaseModel):
    metric: str
    sign: int  # +1: fail on a rise; -1: fail on a fall
    threshold: float
    relative: bool
    text: str

    def crossed(self, diff: float | None, rel: float | None) -> bool:
        """Whether a change (absolute diff in the metric's unit, rel as a fraction) crosses this rule."""
        if self.relative:
            if rel is None:
                return False
            return self.sign * rel * 100.0 > self.threshold
        if diff is None:
            return False
        scaled = diff * 100.0 if self.metric == "error_rate" else diff
        return self.sign * scaled > self.threshold


def parse_gate(spec: str) -> list[GateRule]:
    rules = []
    for part in (p for p in spec.split(",") if p.strip()):
        match = _RULE_RE.match(part)
        if not match:
            raise ConfigError(
                f"gate rule {part.strip()!r} is not METRIC:+N% or METRIC:-N (e.g. 'p99_ms:+5%,qps:-3%,error_rate:+0.1')"
            )
        metric, sign, number, percent = match.groups()
        if metric not in GATE_METRICS:
            raise ConfigError(f"gate metric {metric!r} is unknown; valid metrics: {', '.join(GATE_METRICS)}")
        rules.append(
            GateRule(
                metric=metric,
                sign=1 if sign == "+" else -1,
                threshold=float(number),
                relative=bool(percent),
                text=part.strip(),
            )
        )
    if not rules:
        raise ConfigError("--gate is empty; give rules such as 'p99_ms:+5%,qps:-3%'")
    return rules

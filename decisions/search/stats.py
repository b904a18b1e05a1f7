"""The statistics of one capacity-search probe: its P99 interval, its verdict, and what a probe can measure.

A probe passes only when the upper end of its P99 interval is within the SLO and fails only when
the lower end is above it (or errors or a goodput shortfall fail it outright); in between it is
uncertain (at the SLO within its interval), and a probe without one ok answer has no verdict. The same binomial arithmetic says, before any probe, how many ok samples can bound a
P99 at all and so the lowest rate a probe of `max_probe_s` can judge (`feasibility`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from embedperf.errors import ConfigError
from embedperf.verdicts import ProbeVerdict
from scenarios.models import Search, Slo

Verdict = ProbeVerdict
Params = dict[str, float | str]
QUANTILE = 0.99
COUNT_MARGIN = 1.15  # a probe aims 15% above its sample target: a Poisson count falls short of its mean
DEPENDENCE_BATCHES = 20  # contiguous batches (send order) that measure how much latencies move together

# Why a probe got its verdict: code -> English text (str.format params).
# The report renders the same codes in its own language (reports/i18n.py keys sr_<code>).
REASONS: dict[str, str] = {
    "error_budget": "error rate {error_rate_pct:.2f}% above the budget {budget_pct:g}%",
    "goodput_short": "goodput {goodput_rps:.1f} req/s short of the offered {offered_rps:.1f} req/s",
    "no_ok": "no ok request after the warm-up",
    "p99_within": "P99 {p99_ms:.1f} ms, interval up to {upper_ms:.1f} ms within {slo_ms:g} ms",
    "p99_above": "P99 {p99_ms:.1f} ms, interval from {lower_ms:.1f} ms above {slo_ms:g} ms",
    "p99_straddles": "P99 {p99_ms:.1f} ms, interval {lower_ms:.1f} ms .. {upper_text} straddles the SLO",
}


class ProbeMeasurement(BaseModel):
    """What one probe measured (after its warm-up); latencies are from the intended send time."""

    model_config = ConfigDict(extra="forbid")

    rate: float
    duration_s: float
    scheduled: int
    ok: int
    errors: int
    ok_done: int = Field(description="Ok answers that arrived within the probe's steady window (goodput).")
    unfinished_ms: list[float] = Field(
        default_factory=list,
        exclude=True,
        description="One entry per request still unanswered when the probe's drain ended: the lower bound "
        "of its latency (the time from its intended start to the end of the drain).",
    )
    ok_latency_ms: list[float] = Field(default_factory=list, exclude=True)

    def pooled(self, other: ProbeMeasurement) -> ProbeMeasurement:
        """Two probes at the same rate as one sample (a repeat adds to the first, it does not replace it)."""
        summed = ("duration_s", "scheduled", "ok", "errors", "ok_done", "unfinished_ms", "ok_latency_ms")
        return ProbeMeasurement(rate=self.rate, **{f: getattr(self, f) + getattr(other, f) for f in summed})

    def latency_samples_ms(self, slo_ms: float) -> list[float]:
        """Ok latencies plus every unfinished request, counted as slower than the SLO.

        An unfinished request's latency is at least its lower bound; where that bound is still within
        the SLO (a drain shorter than the SLO) it counts just above the SLO, so a request the probe
        could not wait for never helps a probe pass.
        """
        above = math.nextafter(slo_ms, math.inf)
        return self.ok_latency_ms + [max(bound, above) for bound in self.unfinished_ms]


def quantile_ci(
    values_ms: Sequence[float], q: float, confidence: float, dependence: float = 1.0
) -> tuple[float | None, float, float]:
    """Point estimate and distribution-free interval for the q-quantile from order statistics.

    The number of samples below the true quantile is Binomial(n, q); the interval runs between the
    order statistics at that distribution's two tail quantiles. With too few samples an end is
    unbounded (-inf / +inf), which makes the verdict uncertain instead of optimistic. `dependence`
    (see dependence_factor) counts the n samples as n / dependence independent ones: the binomial is
    taken over that many and its ranks scaled back to the n samples, so correlated latencies widen
    the interval by about the square root of the factor.
    """
    n = len(values_ms)
    if n == 0:
        return None, -math.inf, math.inf
    x = np.sort(np.asarray(values_ms, dtype=float))
    point = float(np.quantile(x, q, method="inverted_cdf"))
    alpha = 1.0 - confidence
    n_eff = effective_count(n, dependence)
    lo_k = _binom_ppf(alpha / 2.0, n_eff, q)  # number of samples below the lower bound
    hi_k = _binom_ppf(1.0 - alpha / 2.0, n_eff, q) + 1  # 1-based order statistic for the upper bound
    if n_eff < n:
        lo_k, hi_k = math.floor(lo_k * n / n_eff), math.ceil(hi_k * n / n_eff)
    lower = float(x[lo_k - 1]) if lo_k >= 1 else -math.inf
    upper = float(x[hi_k - 1]) if hi_k <= n else math.inf
    return point, lower, upper


def effective_count(n: int, dependence: float) -> int:
    """How many independent answers n answers with this dependence factor are worth (1..n)."""
    return min(n, max(1, round(n / max(1.0, dependence))))


def dependence_factor(above: Sequence[float] | np.ndarray, counts: Sequence[float] | np.ndarray) -> float:
    """How much consecutive latencies move together, as the factor (>= 1) by which they shrink the sample.

    The answers of a step, in send order, cut into contiguous batches (`counts` answers each, `above` of
    them above the quantile's point estimate): the batch-means estimate of the long-run variance of the
    share above, over the variance p(1 - p) that independent answers would give. Under load a slow
    moment slows many answers at once, so the answers above a P99 come in bursts and the factor is
    well above 1 (about 5 on a batching service); for independent answers it stays near 1.
    """
    a, c = np.asarray(above, dtype=float), np.asarray(counts, dtype=float)
    a, c = a[c > 0], c[c > 0]
    n = float(c.sum())
    p = float(a.sum()) / n if n else 0.0
    if len(c) < 2 or not 0.0 < p < 1.0:
        return 1.0
    long_run_variance = float((c * (a / c - p) ** 2).sum()) / (len(c) - 1)
    return max(1.0, long_run_variance / (p * (1.0 - p)))


def batch_sizes(n: int, batches: int = DEPENDENCE_BATCHES) -> list[int]:
    """Sizes of `batches` contiguous batches of n answers, as SQL's ntile cuts them (the first ones one larger)."""
    whole, extra = divmod(n, batches)
    return [whole + (1 if i < extra else 0) for i in range(min(n, batches))]


def ordered_dependence_factor(values_in_send_order_ms: Sequence[float], q: float) -> float:
    """dependence_factor of latencies given in the order their requests were sent, at their q-quantile."""
    x = np.asarray(values_in_send_order_ms, dtype=float)
    if len(x) < 2:
        return 1.0
    point = float(np.quantile(x, q, method="inverted_cdf"))
    sizes = batch_sizes(len(x))
    ends = np.cumsum(sizes)
    above = np.add.reduceat((x > point).astype(float), ends - np.asarray(sizes))
    return dependence_factor(above, sizes)


def _binom_ppf(p: float, n: int, q: float) -> int:
    """Smallest k with P(Binomial(n, q) <= k) >= p (log-space pmf, exact for any n)."""
    ks = np.arange(n + 1, dtype=float)
    log_pmf = (
        np.array([math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in ks])
        + ks * math.log(q)
        + (n - ks) * math.log1p(-q)
    )
    cdf = np.cumsum(np.exp(log_pmf - log_pmf.max()))
    cdf /= cdf[-1]
    return int(np.searchsorted(cdf, p - 1e-12))


def samples_to_bound(q: float, confidence: float) -> int:
    """The fewest samples whose largest one is an upper confidence bound on the q-quantile.

    With n samples the chance that all of them fall below the q-quantile is q^n; the upper end of
    a two-sided interval exists once that is at most (1 - confidence) / 2. Fewer samples can never
    pass a probe, whatever the target does.
    """
    tail = (1.0 - confidence) / 2.0
    n = max(1, math.ceil(math.log(tail) / math.log(q)))
    while q**n > tail:  # guard the ceil against rounding at an exact boundary
        n += 1
    while n > 1 and q ** (n - 1) <= tail:
        n -= 1
    return n


@dataclass(frozen=True)
class Feasibility:
    """What a search's probes can measure, checked before any probe runs."""

    samples_needed: int  # ok samples a probe aims for: max(min_ok_requests, samples_to_bound)
    samples_to_bound: int  # the fewest samples that bound the P99 at the search's confidence
    floor_rps: float  # the lowest rate a probe of max_probe_s collects samples_needed at (with margin)
    min_rate: float  # the lowest rate the search probes: max(search.min_rate, floor_rps)
    min_rate_raised: bool  # search.min_rate was below the floor and has been raised to it

    def floor_reason(self, spec: Search) -> str:
        """Why the floor is where it is, in one clause."""
        return (
            f"{self.floor_rps:.3g} req/s is the lowest rate at which a probe of {spec.max_probe_s:g} s "
            f"({spec.warmup_s:g} s warm-up) collects {self.samples_needed} ok answers "
            f"(x{COUNT_MARGIN:g} for Poisson counts)"
        )


def feasibility(spec: Search) -> Feasibility:
    """Refuse (ConfigError, one line) a search whose probes could never bound a P99; else its floor.

    Raises when min_ok_requests is below samples_to_bound, or when start_rate or max_rate is below
    the floor: those probes could only ever be uncertain.
    """
    bound = samples_to_bound(QUANTILE, spec.confidence)
    if spec.min_ok_requests < bound:
        raise ConfigError(
            f"search.min_ok_requests {spec.min_ok_requests} can never bound a P99 at "
            f"{spec.confidence:.0%} confidence: that needs at least {bound} ok answers per probe "
            f"(1 - 0.99^n >= {1.0 - (1.0 - spec.confidence) / 2.0:g}); pass --min-ok-requests {bound} or more"
        )
    needed = spec.min_ok_requests
    steady_s = spec.max_probe_s - spec.warmup_s
    floor = COUNT_MARGIN * needed / steady_s
    for name, rate in (("max_rate", spec.max_rate), ("start_rate", spec.start_rate)):
        if rate < floor:
            raise ConfigError(
                f"search.{name} {rate:g} req/s is below {floor:.3g} req/s, the lowest rate at which a "
                f"{spec.max_probe_s:g} s probe ({spec.warmup_s:g} s warm-up) collects {needed} ok answers; "
                f"pass --{name.replace('_', '-')} {math.ceil(floor)} or more, or a longer --max-probe-s "
                f"(at least {spec.warmup_s + COUNT_MARGIN * needed / rate:.3g} s) or fewer --min-ok-requests "
                f"(not below {bound})"
            )
    wanted_min = spec.min_rate if spec.min_rate is not None else floor
    return Feasibility(
        samples_needed=needed, samples_to_bound=bound, floor_rps=floor, min_rate=max(wanted_min, floor),
        min_rate_raised=spec.min_rate is not None and spec.min_rate < floor,
    )  # fmt: skip


def judge(
    m: ProbeMeasurement, slo: Slo, spec: Search
) -> tuple[Verdict, str, Params, tuple[float | None, float, float]]:
    """The verdict of one probe, why (a REASONS code and its params), and the P99 estimate and interval."""
    ci = quantile_ci(m.latency_samples_ms(slo.p99_ms), QUANTILE, spec.confidence)
    error_rate = m.errors / m.scheduled if m.scheduled else 0.0
    if error_rate * 100.0 > slo.error_budget_pct:
        budget: Params = {"error_rate_pct": error_rate * 100.0, "budget_pct": slo.error_budget_pct}
        return "fail", "error_budget", budget, ci
    offered = m.scheduled / m.duration_s if m.duration_s > 0 else 0.0
    goodput = m.ok_done / m.duration_s if m.duration_s > 0 else 0.0
    if m.scheduled - m.ok_done > _goodput_allowance(m, offered, spec.goodput_tolerance):
        return "fail", "goodput_short", {"goodput_rps": goodput, "offered_rps": offered}, ci
    point, lower, upper = ci
    if point is None:
        return "no_verdict", "no_ok", {}, ci
    if upper <= slo.p99_ms:
        return "pass", "p99_within", {"p99_ms": point, "upper_ms": upper, "slo_ms": slo.p99_ms}, ci
    if lower > slo.p99_ms:
        return "fail", "p99_above", {"p99_ms": point, "lower_ms": lower, "slo_ms": slo.p99_ms}, ci
    upper_text = "unbounded (too few samples)" if math.isinf(upper) else f"{upper:.1f} ms"
    return "uncertain", "p99_straddles", {"p99_ms": point, "lower_ms": lower, "upper_text": upper_text}, ci


def reason_text(code: str, params: Params) -> str:
    """A probe's reason in English (the manifest and the console keep this text)."""
    return REASONS[code].format(**params) if code in REASONS else code


def _goodput_allowance(m: ProbeMeasurement, offered_rps: float, tolerance: float) -> float:
    """How many answers a probe may miss in its window before it counts as falling behind.

    The tolerance share of the requests, but never less than the count noise at the window's
    edges (requests in flight when it closes): 3 x sqrt(1 + rate x median latency).
    """
    p50_s = float(np.median(m.ok_latency_ms)) / 1000.0 if m.ok_latency_ms else 0.0
    return max(tolerance * m.scheduled, 3.0 * math.sqrt(1.0 + offered_rps * p50_s))

"""SLO capacity search, the pure part: probe verdicts with a P99 confidence interval, bracket and bisect.

The load side (loadgen/search.py) runs the probes this module asks for and hands back what each
one measured; everything here is arithmetic on those figures, so it is tested without a target.
A probe passes only when the upper end of its P99 interval is within the SLO and fails only when
the lower end is above it (or when errors or a goodput shortfall fail it outright); anything in
between is repeated once and then reported as uncertain, never rounded to a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from analysis.capacity import device_plan
from embedperf.schema import Manifest
from scenarios.models import Search, Slo

Verdict = Literal["pass", "fail", "uncertain"]
Phase = Literal["bracket", "bisect", "repeat", "confirm"]
SearchStatus = Literal[
    "found", "uncertain", "below_min_rate", "above_max_rate", "max_duration", "unconfirmed"
]
QUANTILE = 0.99
MAX_CONFIRMS = 2
COUNT_MARGIN = 1.15  # a probe aims 15% above min_ok_requests: a Poisson count falls short of its mean

RULE = (
    "open-loop probes; latency is measured from each request's intended send time. A probe passes "
    "when the upper end of its {confidence:.0%} P99 interval "
    "(order statistics, binomial) is <= {p99:g} ms, its error rate <= {budget:g}% and its goodput >= "
    "{goodput:.0%} of the offered rate (answers completed within the probe's window); it fails when the lower end is above the SLO or errors/goodput "
    "fail it; otherwise it is repeated once, then reported uncertain. Bracket by x{growth:g}, bisect "
    "until (high - low) / high <= {precision:.0%}, confirm the answer with a {confirm:g}x longer probe."
)


# Why a probe got its verdict, and why a search stopped: code -> English text (str.format params).
# The report renders the same codes in its own language (reports/i18n.py keys sr_<code>, sn_<status>).
REASONS: dict[str, str] = {
    "error_budget": "error rate {error_rate_pct:.2f}% above the budget {budget_pct:g}%",
    "goodput_short": "goodput {goodput_rps:.1f} req/s short of the offered {offered_rps:.1f} req/s",
    "no_ok": "no ok request after the warm-up",
    "p99_within": "P99 {p99_ms:.1f} ms, interval up to {upper_ms:.1f} ms within {slo_ms:g} ms",
    "p99_above": "P99 {p99_ms:.1f} ms, interval from {lower_ms:.1f} ms above {slo_ms:g} ms",
    "p99_straddles": "P99 {p99_ms:.1f} ms, interval {lower_ms:.1f} ms .. {upper_text} straddles the SLO",
}
NOTES: dict[str, str] = {
    "found": "",
    "uncertain": "the P99 at {rate:g} req/s stays within its interval of the SLO",
    "unconfirmed": "the confirming probe at {rate:g} req/s failed",
    "above_max_rate": "every probe up to max_rate {rate:g} req/s passed",
    "below_min_rate": "even {rate:g} req/s misses the SLO",
    "max_duration": "stopped at --max-duration {seconds:g} s",
}
Params = dict[str, float | str]


class ProbeMeasurement(BaseModel):
    """What one probe measured (after its warm-up); latencies are from the intended send time."""

    model_config = ConfigDict(extra="forbid")

    rate: float
    duration_s: float
    scheduled: int
    ok: int
    errors: int
    ok_done: int = Field(description="Ok answers that arrived within the probe's steady window (goodput).")
    ok_latency_ms: list[float] = Field(default_factory=list, exclude=True)

    def pooled(self, other: ProbeMeasurement) -> ProbeMeasurement:
        """Two probes at the same rate as one sample (a repeat adds to the first, it does not replace it)."""
        return ProbeMeasurement(
            rate=self.rate,
            duration_s=self.duration_s + other.duration_s,
            scheduled=self.scheduled + other.scheduled,
            ok=self.ok + other.ok,
            errors=self.errors + other.errors,
            ok_done=self.ok_done + other.ok_done,
            ok_latency_ms=self.ok_latency_ms + other.ok_latency_ms,
        )


class ProbeRecord(BaseModel):
    """One probe as the manifest keeps it (step index = the run folder's stage index)."""

    model_config = ConfigDict(extra="forbid")

    stage_index: int
    label: str
    phase: Phase
    rate: float
    duration_s: float
    scheduled: int
    ok: int
    error_rate: float
    offered_rps: float
    goodput_rps: float
    p50_ms: float | None
    p99_ms: float | None
    p99_lower_ms: float | None
    p99_upper_ms: float | None
    verdict: Verdict
    reason: str
    reason_code: str = Field("", description="Key of REASONS; the report translates it.")
    reason_params: Params = Field(default_factory=dict)


class SearchRecord(BaseModel):
    """manifest.search: the rule, every probe in run order, the bracket history and the answer."""

    model_config = ConfigDict(extra="forbid")

    rule: str
    slo_p99_ms: float
    error_budget_pct: float
    precision: float
    confidence: float
    arrival: str
    growth: float = 2.0
    goodput_tolerance: float = 0.05
    confirm_factor: float = 2.0
    probes: list[ProbeRecord] = Field(default_factory=list)
    brackets: list[tuple[float | None, float | None]] = Field(
        default_factory=list, description="(highest passing, lowest failing) rate after each probe."
    )
    status: SearchStatus = "found"
    answer_rps: float | None = None
    answer_p99_ms: float | None = None
    uncertainty_rps: tuple[float | None, float | None] = Field(
        default=(None, None), description="The answer lies between these rates (the final bracket)."
    )
    confirm_stage_index: int | None = None
    note: str = ""
    note_params: Params = Field(default_factory=dict, description="Parameters of NOTES[status].")


def quantile_ci(values_ms: Sequence[float], q: float, confidence: float) -> tuple[float | None, float, float]:
    """Point estimate and distribution-free interval for the q-quantile from order statistics.

    The number of samples below the true quantile is Binomial(n, q); the interval runs between the
    order statistics at that distribution's two tail quantiles. With too few samples an end is
    unbounded (-inf / +inf), which makes the verdict uncertain instead of optimistic.
    """
    n = len(values_ms)
    if n == 0:
        return None, -math.inf, math.inf
    x = np.sort(np.asarray(values_ms, dtype=float))
    point = float(np.quantile(x, q, method="inverted_cdf"))
    alpha = 1.0 - confidence
    lo_k = _binom_ppf(alpha / 2.0, n, q)  # number of samples below the lower bound
    hi_k = _binom_ppf(1.0 - alpha / 2.0, n, q) + 1  # 1-based order statistic for the upper bound
    lower = float(x[lo_k - 1]) if lo_k >= 1 else -math.inf
    upper = float(x[hi_k - 1]) if hi_k <= n else math.inf
    return point, lower, upper


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


def judge(
    m: ProbeMeasurement, slo: Slo, spec: Search
) -> tuple[Verdict, str, Params, tuple[float | None, float, float]]:
    """The verdict of one probe, why (a REASONS code and its params), and the P99 estimate and interval."""
    ci = quantile_ci(m.ok_latency_ms, QUANTILE, spec.confidence)
    error_rate = m.errors / m.scheduled if m.scheduled else 0.0
    if error_rate * 100.0 > slo.error_budget_pct:
        return (
            "fail",
            "error_budget",
            {"error_rate_pct": error_rate * 100.0, "budget_pct": slo.error_budget_pct},
            ci,
        )
    offered = m.scheduled / m.duration_s if m.duration_s > 0 else 0.0
    goodput = m.ok_done / m.duration_s if m.duration_s > 0 else 0.0
    if m.scheduled - m.ok_done > _goodput_allowance(m, offered, spec.goodput_tolerance):
        return "fail", "goodput_short", {"goodput_rps": goodput, "offered_rps": offered}, ci
    point, lower, upper = ci
    if point is None:
        return "uncertain", "no_ok", {}, ci
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


class ProbePlan(BaseModel):
    """The next probe the search wants."""

    model_config = ConfigDict(extra="forbid")

    rate: float
    duration_s: float
    phase: Phase


class SearchState:
    """Bracket, then bisect, then confirm; decides each next probe from the verdicts so far."""

    def __init__(self, spec: Search, slo: Slo, arrival: str) -> None:
        self.spec = spec
        self.slo = slo
        self.low: float | None = None  # highest rate that passed
        self.high: float | None = None  # lowest rate that failed
        self.passes: list[float] = []
        self.confirms = 0
        self.done = False
        self.record = SearchRecord(
            rule=RULE.format(
                confidence=spec.confidence,
                p99=slo.p99_ms,
                budget=slo.error_budget_pct,
                goodput=1.0 - spec.goodput_tolerance,
                growth=spec.growth,
                precision=spec.precision,
                confirm=spec.confirm_factor,
            ),
            slo_p99_ms=slo.p99_ms,
            error_budget_pct=slo.error_budget_pct,
            precision=spec.precision,
            confidence=spec.confidence,
            arrival=arrival,
            growth=spec.growth,
            goodput_tolerance=spec.goodput_tolerance,
            confirm_factor=spec.confirm_factor,
        )
        self._last: ProbeRecord | None = None
        self._last_measurement: ProbeMeasurement | None = None

    def probe_duration_s(self, rate: float, phase: Phase) -> float:
        """Long enough for min_ok_requests after the warm-up (with margin for Poisson counts), within
        [min_probe_s, max_probe_s]."""
        spec = self.spec
        wanted = spec.warmup_s + COUNT_MARGIN * spec.min_ok_requests / rate
        duration = min(max(wanted, spec.min_probe_s), spec.max_probe_s)
        return duration * spec.confirm_factor if phase == "confirm" else duration

    def next_probe(self, elapsed_s: float) -> ProbePlan | None:
        """The next probe, or None when the search is over (the record then holds the answer)."""
        if self.done:
            return None
        plan = self._plan()
        if plan is None:
            self.done = True
            return None
        if elapsed_s + plan.duration_s > self.spec.max_duration_s:
            self._finish("max_duration", {"seconds": self.spec.max_duration_s})
            return None
        return plan

    def _plan(self) -> ProbePlan | None:
        spec, last = self.spec, self._last
        if last is None:
            return self._at(spec.start_rate, "bracket")
        if last.verdict == "uncertain":
            if last.phase != "repeat":
                return self._at(last.rate, "repeat")
            self._finish("uncertain", {"rate": last.rate})
            return None
        if last.phase == "confirm":
            if last.verdict == "pass":
                self._finish("found", {})
                return None
            if self.confirms >= MAX_CONFIRMS:
                self._finish("unconfirmed", {"rate": last.rate})
                return None
        if self.high is None:
            assert self.low is not None
            if self.low >= spec.max_rate:
                self._finish("above_max_rate", {"rate": spec.max_rate})
                return None
            return self._at(min(self.low * spec.growth, spec.max_rate), "bracket")
        if self.low is None:
            if self.high <= spec.min_rate:
                self._finish("below_min_rate", {"rate": spec.min_rate})
                return None
            return self._at(max(self.high / spec.growth, spec.min_rate), "bracket")
        if (self.high - self.low) / self.high <= spec.precision:
            self.confirms += 1
            return self._at(self.low, "confirm")
        return self._at((self.low + self.high) / 2.0, "bisect")

    def _at(self, rate: float, phase: Phase) -> ProbePlan:
        return ProbePlan(rate=round(rate, 3), duration_s=self.probe_duration_s(rate, phase), phase=phase)

    def add(self, plan: ProbePlan, stage_index: int, label: str, m: ProbeMeasurement) -> ProbeRecord:
        """Record a probe's measurement and move the bracket (a repeat is judged on both samples pooled)."""
        if plan.phase == "repeat" and self._last_measurement is not None:
            m = self._last_measurement.pooled(m)
        self._last_measurement = m
        verdict, code, params, (point, lower, upper) = judge(m, self.slo, self.spec)
        ok = np.asarray(m.ok_latency_ms, dtype=float)
        probe = ProbeRecord(
            stage_index=stage_index,
            label=label,
            phase=plan.phase,
            rate=plan.rate,
            duration_s=m.duration_s,
            scheduled=m.scheduled,
            ok=m.ok,
            error_rate=m.errors / m.scheduled if m.scheduled else 0.0,
            offered_rps=m.scheduled / m.duration_s if m.duration_s > 0 else 0.0,
            goodput_rps=m.ok_done / m.duration_s if m.duration_s > 0 else 0.0,
            p50_ms=float(np.quantile(ok, 0.5, method="inverted_cdf")) if len(ok) else None,
            p99_ms=point,
            p99_lower_ms=_finite(lower),
            p99_upper_ms=_finite(upper),
            verdict=verdict,
            reason=reason_text(code, params),
            reason_code=code,
            reason_params=params,
        )
        if verdict == "pass":
            self.passes.append(plan.rate)
            self.low = max(self.low or 0.0, plan.rate)
            if plan.phase == "confirm":
                self.record.confirm_stage_index = stage_index
                self.record.answer_p99_ms = point
        elif verdict == "fail":
            self.high = plan.rate if self.high is None else min(self.high, plan.rate)
            if self.low is not None and self.low >= plan.rate:  # a failed confirmation moves the answer down
                self.passes = [r for r in self.passes if r < plan.rate]
                self.low = max(self.passes) if self.passes else None
        self.record.probes.append(probe)
        self.record.brackets.append((self.low, self.high))
        self._last = probe
        return probe

    def _finish(self, status: SearchStatus, note_params: Params) -> None:
        self.done = True
        rec = self.record
        rec.status = status
        rec.note = NOTES[status].format(**note_params)
        rec.note_params = note_params
        rec.answer_rps = self.low
        rec.uncertainty_rps = (self.low, self.high)
        if rec.answer_p99_ms is None and self.low is not None:
            at_answer = [p for p in rec.probes if p.rate == self.low and p.verdict == "pass"]
            rec.answer_p99_ms = at_answer[-1].p99_ms if at_answer else None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def read_search(manifest: Manifest) -> SearchRecord | None:
    """manifest.search back as the typed record it was written from (None for runs without a search)."""
    raw = (manifest.model_extra or {}).get("search")
    return SearchRecord.model_validate(raw) if raw else None


def devices_serving(manifest: Manifest) -> int:
    """How many devices the answer is divided by: the run's serving devices (1 when none is known)."""
    return max(len(manifest.serving_devices.indices), 1)


def headline(record: SearchRecord, devices: int) -> str:
    """'N req/s per device at P99 <= X ms' (or why there is no such N)."""
    if record.answer_rps is None:
        return f"no probed rate meets P99 <= {record.slo_p99_ms:g} ms ({record.status}: {record.note})"
    per_device = record.answer_rps / max(devices, 1)
    low, high = record.uncertainty_rps
    span = f", between {low:g} and {high:g} req/s" if high is not None else ""
    tail = "" if record.status == "found" else f" [{record.status}: {record.note}]"
    return (
        f"{per_device:.1f} req/s per device at P99 <= {record.slo_p99_ms:g} ms "
        f"({record.answer_rps:g} req/s on {devices} device(s){span}){tail}"
    )


class SearchSlo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    p99_ms: float
    error_budget_pct: float


class SearchSummary(BaseModel):
    """summary.json `search`: the searched answer for CI tools and the matrix, without the manifest."""

    model_config = ConfigDict(extra="forbid")

    status: SearchStatus
    answer_rps: float | None = Field(description="Highest rate that met the SLO (all serving devices).")
    per_device_rps: float | None = Field(description="answer_rps / devices.")
    devices: int
    p99_ms: float | None = Field(description="P99 measured at the answer (the confirming probe's).")
    slo: SearchSlo
    bracket: tuple[float | None, float | None] = Field(
        description="(highest passing, lowest failing) rate: the answer's uncertainty."
    )
    probes: int
    note: str = ""


def search_summary(manifest: Manifest) -> SearchSummary | None:
    """The answer of a search run as summary.json carries it (None for runs that were not a search)."""
    record = read_search(manifest)
    if record is None:
        return None
    devices = devices_serving(manifest)
    answer = record.answer_rps
    return SearchSummary(
        status=record.status,
        answer_rps=answer,
        per_device_rps=answer / devices if answer is not None else None,
        devices=devices,
        p99_ms=record.answer_p99_ms,
        slo=SearchSlo(p99_ms=record.slo_p99_ms, error_budget_pct=record.error_budget_pct),
        bracket=record.uncertainty_rps,
        probes=len(record.probes),
        note=record.note,
    )


def plan_lines(manifest: Manifest, target_qps: float | None, headroom: float) -> list[str]:
    """`embedperf capacity` on a search run: the searched answer, and devices for a target from it."""
    record = read_search(manifest)
    if record is None:
        return []
    devices = devices_serving(manifest)
    lines = [f"  capacity search: {headline(record, devices)}"]
    if target_qps is not None and record.answer_rps is not None:
        plan = device_plan(record.answer_rps, devices, target_qps, headroom)
        lines.append(
            f"  from the searched answer, for {target_qps:g} QPS with {headroom:.0%} headroom: {plan.replicas} "
            f"replica(s) x {plan.devices_per_replica} device(s) = {plan.devices} device(s)"
        )
    return lines

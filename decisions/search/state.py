"""SLO capacity search, the pure part: bracket, bisect and confirm from each probe's verdict.

The load side (loadgen/shaping/search.py) runs the probes this module asks for and hands back what each
one measured; everything here is arithmetic on those figures, so it is tested without a target.
A probe's verdict comes from decisions.search.stats; the record it leaves from decisions.search.record.

A rate whose probe stays uncertain after its pooled repeat is information, not a dead end: its P99 interval
contains the SLO, so the limit is at that rate within the measurement's resolution. It bounds the bracket from
above like a failing rate ("top": the lowest rate not known to pass above the highest pass), and bisection
goes on until (top - low) / top <= precision. The answer is then never more than --precision below a rate
whose P99 interval contains the SLO, unless the status says why (wide_interval, max_duration, unconfirmed).
"""

from __future__ import annotations

import math

import numpy as np

from decisions.search.record import (
    NOTES,
    OUTCOMES,
    Outcome,
    Phase,
    ProbeRecord,
    SearchRecord,
    SearchStatus,
    SearchSummary,
    Strict,
    devices_serving,
    headline,
    note_key,
    read_search,
    search_summary,
)
from decisions.search.stats import (
    COUNT_MARGIN,
    QUANTILE,
    REASONS,
    Feasibility,
    Params,
    ProbeMeasurement,
    Verdict,
    feasibility,
    judge,
    quantile_ci,
    reason_text,
    samples_to_bound,
)
from scenarios.models import Search, Slo

__all__ = [
    "COUNT_MARGIN", "NOTES", "OUTCOMES", "QUANTILE", "REASONS", "RULE", "Feasibility", "Outcome", "Phase",
    "ProbeMeasurement", "ProbePlan", "ProbeRecord", "SearchRecord", "SearchState", "SearchStatus",
    "SearchSummary", "Verdict", "devices_serving", "feasibility", "headline", "judge", "quantile_ci",
    "read_search", "reason_text", "samples_to_bound", "search_summary",
]  # fmt: skip

# A failed confirmation is information too (the pass it checked was noise): the search narrows below
# it and confirms again; after this many it stops, status unconfirmed.
MAX_CONFIRMS = 5

RULE = (
    "open-loop probes; latency is measured from each request's intended send time. A probe passes "
    "when the upper end of its {confidence:.0%} P99 interval "
    "(order statistics, binomial) is <= {p99:g} ms, its error rate <= {budget:g}% and its goodput >= "
    "{goodput:.0%} of the offered rate (answers completed within the probe's window); it fails when the lower end is above the SLO or errors/goodput "
    "fail it; otherwise it is repeated once and judged on both samples pooled. A rate still uncertain then "
    "is at the SLO within the interval and bounds the bracket from above like a failing one. Bracket by "
    "x{growth:g}, bisect until (top - low) / top <= {precision:.0%}, confirm the answer with a {confirm:g}x "
    "longer probe (never longer than max_probe_s)."
)


class ProbePlan(Strict):
    """The next probe the search wants."""

    rate: float
    duration_s: float
    phase: Phase


class SearchState:
    """Bracket, then bisect, then confirm; decides each next probe from the verdicts so far. Raises
    ConfigError on construction when the search cannot bound a P99 at all (see
    decisions.search.stats.feasibility); never plans a probe below the floor or above max_probe_s."""

    def __init__(self, spec: Search, slo: Slo, arrival: str) -> None:
        self.spec = spec
        self.slo = slo
        self.limits = feasibility(spec)
        self.passes: list[float] = []  # rates that passed (dropped once a probe at or below fails)
        self.fails: list[float] = []
        self.at_slo: dict[float, ProbeRecord] = {}  # rate -> the pooled probe whose interval holds the SLO
        self.confirms = 0
        self.done = False
        rule = RULE.format(
            confidence=spec.confidence, p99=slo.p99_ms, budget=slo.error_budget_pct,
            goodput=1.0 - spec.goodput_tolerance, growth=spec.growth, precision=spec.precision,
            confirm=spec.confirm_factor,
        )  # fmt: skip
        self.record = SearchRecord(
            rule=rule, slo_p99_ms=slo.p99_ms, error_budget_pct=slo.error_budget_pct, arrival=arrival,
            precision=spec.precision, confidence=spec.confidence, growth=spec.growth,
            goodput_tolerance=spec.goodput_tolerance, confirm_factor=spec.confirm_factor,
            samples_needed=self.limits.samples_needed, floor_rps=self.limits.floor_rps,
            min_rate_rps=self.limits.min_rate,
        )  # fmt: skip
        self._last: ProbeRecord | None = None
        self._last_plan: ProbePlan | None = None
        self._last_measurement: ProbeMeasurement | None = None
        self._confirming: float | None = None  # the rate a confirm (or its repeat) is checking

    @property
    def low(self) -> float | None:
        """The highest rate that passed (and was not contradicted by a probe at or below it)."""
        return max(self.passes) if self.passes else None

    @property
    def high(self) -> float | None:
        """The lowest rate that failed."""
        return min(self.fails) if self.fails else None

    @property
    def top(self) -> float | None:
        """The lowest rate above `low` not known to pass: failing, or at the SLO within its interval."""
        low, high = self.low, self.high
        candidates = [r for r in self.at_slo if low is None or r > low] + ([high] if high is not None else [])
        return min(candidates) if candidates else None

    def probe_duration_s(self, rate: float, phase: Phase) -> float:
        """Long enough for min_ok_requests after the warm-up (with margin for Poisson counts), within
        [min_probe_s, max_probe_s]; a confirming probe confirm_factor times longer, still <= max_probe_s."""
        spec = self.spec
        wanted = spec.warmup_s + COUNT_MARGIN * self.limits.samples_needed / rate
        duration = min(max(wanted, spec.min_probe_s), spec.max_probe_s)
        if phase == "confirm":
            duration = min(duration * spec.confirm_factor, spec.max_probe_s)
        return duration

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
        if last is None or self._last_plan is None:
            return self._at(spec.start_rate, "bracket")
        if last.verdict in ("uncertain", "no_verdict") and last.phase != "repeat":
            return ProbePlan(rate=last.rate, duration_s=self._last_plan.duration_s, phase="repeat")
        if self._confirming is not None:
            rate, self._confirming = self._confirming, None
            if last.verdict == "pass":
                self._finish(*self._final_status())
                return None
            if self.confirms >= MAX_CONFIRMS:
                self._finish("unconfirmed", {"rate": rate})
                return None
        low, top = self.low, self.top
        if top is None:
            assert low is not None
            if low >= spec.max_rate:
                self._finish("above_max_rate", {"rate": spec.max_rate})
                return None
            return self._at(min(low * spec.growth, spec.max_rate), "bracket")
        if low is None:
            # the floor as a probe rate (_at rounds to 3 places): never below the floor itself
            floor = math.ceil(self.limits.min_rate * 1000.0) / 1000.0
            if top <= floor:
                self._finish("below_min_rate", self._below_min_rate_params(top))
                return None
            return self._at(max(top / spec.growth, floor), "bracket")
        if (top - low) / top <= spec.precision:
            self.confirms += 1
            self._confirming = low
            return self._at(low, "confirm")
        return self._at((low + top) / 2.0, "bisect")

    def _at(self, rate: float, phase: Phase) -> ProbePlan:
        return ProbePlan(rate=round(rate, 3), duration_s=self.probe_duration_s(rate, phase), phase=phase)

    def _final_status(self) -> tuple[SearchStatus, Params]:
        """found when no rate above the answer is at the SLO (the top fails); at_slo when such rates lie
        within --precision of the answer; wide_interval when one lies further above (even above a failing
        rate: the measurements then disagree by more than --precision)."""
        low = self.low
        assert low is not None
        above = sorted(r for r in self.at_slo if r > low)  # above a failing rate too: the rule names any
        if not above:
            return "found", {}
        widest = above[-1]
        if (widest - low) / widest > self.spec.precision:
            return "wide_interval", self._at_slo_params(widest, low) | {
                "gap_pct": (widest - low) / low * 100.0, "precision_pct": self.spec.precision * 100.0,
                "samples": float(self.at_slo[widest].judged_samples),
            }  # fmt: skip
        return "at_slo", self._at_slo_params(above[0], low)

    def _at_slo_params(self, rate: float, answer: float) -> Params:
        probe = self.at_slo[rate]
        # an unbounded end (too few samples) shows the point estimate instead
        point = probe.p99_ms if probe.p99_ms is not None else self.slo.p99_ms
        return {
            "rate": rate, "answer": answer, "confidence_pct": self.spec.confidence * 100.0,
            "lower_ms": probe.p99_lower_ms if probe.p99_lower_ms is not None else point,
            "upper_ms": probe.p99_upper_ms if probe.p99_upper_ms is not None else point,
        }  # fmt: skip

    def add(self, plan: ProbePlan, stage_index: int, label: str, m: ProbeMeasurement) -> ProbeRecord:
        """Record a probe's measurement and move the bracket (a repeat is judged on both samples pooled)."""
        own = m
        if plan.phase == "repeat" and self._last_measurement is not None:
            m = self._last_measurement.pooled(m)
        self._last_measurement = m
        verdict, code, params, (point, lower, upper) = judge(m, self.slo, self.spec)
        ok = np.asarray(m.ok_latency_ms, dtype=float)
        probe = ProbeRecord(
            stage_index=stage_index, label=label, phase=plan.phase, rate=plan.rate, duration_s=own.duration_s,
            scheduled=own.scheduled, ok=own.ok,
            error_rate=own.errors / own.scheduled if own.scheduled else 0.0,
            offered_rps=own.scheduled / own.duration_s if own.duration_s > 0 else 0.0,
            goodput_rps=own.ok_done / own.duration_s if own.duration_s > 0 else 0.0,
            unfinished=len(own.unfinished_ms), judged_samples=len(m.ok_latency_ms) + len(m.unfinished_ms),
            p50_ms=float(np.quantile(ok, 0.5, method="inverted_cdf")) if len(ok) else None, p99_ms=point,
            p99_lower_ms=_finite(lower), p99_upper_ms=_finite(upper), verdict=verdict,
            reason=reason_text(code, params), reason_code=code, reason_params=params,
        )  # fmt: skip
        if verdict == "pass":
            self.passes.append(plan.rate)
            if plan.phase == "confirm" or (plan.phase == "repeat" and self._confirming is not None):
                self.record.confirm_stage_index = stage_index
        elif verdict == "fail" or (verdict == "no_verdict" and plan.phase == "repeat"):
            # no ok answer even on the pooled sample: nothing shows the rate can be served
            self.fails.append(plan.rate)
            self._contradicted(plan.rate)
        elif plan.phase == "repeat":  # still uncertain on the pooled sample: at the SLO
            self.at_slo[plan.rate] = probe
            self._contradicted(plan.rate)
        self.record.probes.append(probe)
        self.record.brackets.append((self.low, self.top))
        self._last, self._last_plan = probe, plan
        return probe

    def _contradicted(self, rate: float) -> None:
        """A rate that fails or is at the SLO is no longer an answer, nor is any pass at or above it."""
        self.passes = [r for r in self.passes if r < rate]

    def _below_min_rate_params(self, rate: float) -> Params:
        """Why even the lowest rate fails: its errors when its last probe failed on them, else the floor."""
        last = next((p for p in reversed(self.record.probes) if p.rate == rate), None)
        if last is not None and last.reason_code == "error_budget":
            return {"rate": rate, "cause": "errors", **last.reason_params}
        limits = self.limits
        return {"rate": rate, "floor": limits.floor_rps, "probe_s": self.spec.max_probe_s,
                "samples": float(limits.samples_needed)}

    def _finish(self, status: SearchStatus, note_params: Params) -> None:
        self.done = True
        rec = self.record
        rec.status, rec.note_params = status, note_params
        rec.note = NOTES[note_key(status, note_params)].format(**note_params)
        low, top = self.low, self.top
        rec.answer_rps, rec.uncertainty_rps = low, (low, top)
        above = [r for r in self.at_slo if low is not None and r > low]
        rec.at_slo_rps = max(above) if above else None
        at_answer = [p for p in rec.probes if low is not None and p.rate == low and p.verdict == "pass"]
        if at_answer:
            best = at_answer[-1]  # the confirming probe when there is one (it runs last at the answer)
            rec.answer_p99_ms, rec.answer_p99_lower_ms = best.p99_ms, best.p99_lower_ms
            rec.answer_p99_upper_ms = best.p99_upper_ms


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None

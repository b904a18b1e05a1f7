"""Run comparison: steps matched by load, per-metric changes with bootstrap confidence intervals, the gate.

Steps are matched by their load (users, or arrival rate), never by position: a 3-step smoke run
compared with a 4-step ramp must not pair users=1 with users=10. A change whose statistic the data
cannot support (too few ok samples for the percentile, too few seconds for a throughput interval,
a zero-width bootstrap interval) carries a warning and never a better/worse verdict.

"Overall" is the comparison at the highest load both runs share, for every metric alike: one load, so
goodput, latency and errors come from the same requests and one bootstrap. Pooling steps would mix
loads and weight each by its request count, which itself changes with the candidate's speed.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel

from analysis.compare.cost_change import COST_METRIC, cost_change
from analysis.compare.gate import (
    BudgetScope,
    GateResult,
    GateRule,
    empty_sides,
    evaluate_gate,
    failure_lines,
    gate_status,
)
from analysis.compare.model import LATENCY_METRICS, OVERALL_INDEX, MetricChange, Samples, StepComparison
from analysis.compare.reasons import Reason, missing_in, reason, render_reason, sides_reason
from analysis.compare.samples import step_samples
from analysis.figures.bootstrap import (
    DEFAULT_N_BOOT,
    interval,
    resampled_means,
    resampled_percentiles,
    resampled_ratios,
    rng_for,
)
from analysis.model.steps import PERCENTILE_METHOD
from analysis.run.summary import RunAnalysis
from embedperf.schema import ServiceInfo
from embedperf.verdicts import change_verdict

LOWER_IS_BETTER: dict[str, bool] = {
    "qps": False, "tokens_per_s": False, "p50_ms": True, "p95_ms": True, "p99_ms": True, "error_rate": True,
    "device_util_pct": True, "service_cpu_pct": True, "mem_used_mb": True, "unavailable_s": True,
    COST_METRIC: True,
}  # fmt: skip
TELEMETRY_METRICS: tuple[str, ...] = ("device_util_pct", "service_cpu_pct", "mem_used_mb")
Z_95 = 1.959963984540054
# A throughput interval resamples whole seconds: with fewer than this many the bootstrap has too few
# distinct resamples to say anything (5 s steps gave "5.0 ... 5.0" around a change of 7.4).
MIN_QPS_SECONDS = 10
# A mean of 1 Hz telemetry needs a few samples before its interval means anything.
MIN_TELEMETRY_SAMPLES = 5


def min_samples_for(q_pct: float) -> int:
    """Ok samples a percentile needs: at least one sample beyond it (P99: 100, P95: 20, P50: 2)."""
    return math.ceil(100.0 / (100.0 - q_pct) - 1e-9)


class CandidateComparison(BaseModel):
    """One candidate against the baseline. `overall` is a copy of the step at the highest load both runs
    share (`overall_step` names it; None and empty metrics when no step matched)."""

    run_id: str
    label: str
    steps: list[StepComparison]
    overall: StepComparison
    overall_step: str | None = None
    mismatches: list[str]
    unmatched: list[str] = []
    error_budget: float = 0.0
    gate: list[GateResult] = []

    @property
    def empty_steps(self) -> list[str]:
        """A line per matched step where a run has no ok requests: nothing there can be compared."""
        sides = [(step.label, empty_sides(step.base_n_ok, step.cand_n_ok)) for step in self.steps]
        return [f"step {label} has no ok requests in the {empty}" for label, empty in sides if empty]

    @property
    def no_verdict_reasons(self) -> list[str]:
        """Why this candidate cannot pass: unmatched loads, steps without ok requests, rules without a
        verdict (those at an empty step are covered by its line)."""
        empty = {s.label for s in self.steps if empty_sides(s.base_n_ok, s.cand_n_ok)}
        undecided = [g.line for g in self.gate if g.status == "no_verdict" and g.scope not in empty]
        return [*self.unmatched, *self.empty_steps, *undecided]

    @property
    def status(self) -> str:
        """One of fail, no_verdict, pass (see analysis.compare.gate.gate_status)."""
        return gate_status(self.gate, self.no_verdict_reasons)

    @property
    def failures(self) -> list[str]:
        """One line per failed metric and step (see analysis.compare.gate.failure_lines)."""
        return failure_lines(self.gate)

    @property
    def warnings(self) -> list[str]:
        """Changes the data cannot support (too few samples, too short, zero-width), one line each."""
        changes = [(step.label, m) for step in self.steps for m in step.metrics.values()]
        return [f"{m.metric} at {label}: {m.warning}" for label, m in changes if m.warning]


class Comparison(BaseModel):
    base_run_id: str
    base_label: str
    candidates: list[CandidateComparison]
    rules: list[GateRule]
    percentile_method: str = PERCENTILE_METHOD

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.candidates}
        return next((s for s in ("fail", "no_verdict") if s in statuses), "pass")


def _change(
    metric: str, base: float | None, cand: float | None, ci: tuple[float | None, float | None],
    why: Reason | None = None,
) -> MetricChange:  # fmt: skip
    """why: the reason the data cannot support a verdict (reasons.REASONS), None when they can."""
    diff = cand - base if base is not None and cand is not None else None
    rel = diff / base if diff is not None and base else None
    if why is None and ci[0] is not None and ci[0] == ci[1] and diff:
        why = reason("zero_width")
    return MetricChange(
        metric=metric, base=base, cand=cand, diff=diff, rel=rel, ci_low=ci[0], ci_high=ci[1],
        verdict=change_verdict(ci[0], ci[1], LOWER_IS_BETTER[metric], unsupported=why is not None),
        warning=render_reason(why) if why is not None else None, why=why,
    )  # fmt: skip


def _short(code: str, have: float, need: float, **params: float) -> Reason | None:
    return reason(code, have=have, need=need, **params) if have < need else None


def _unsent(base: Samples, cand: Samples) -> Reason | None:
    """Nothing was sent in a run at this step: its zero goodput is an absence, not a measurement."""
    unsent = missing_in(base.n_requests, cand.n_requests)
    return reason("no_requests_in", sides=sides_reason(unsent)) if unsent else None


def compare_samples(base: Samples, cand: Samples, n_boot: int, seed: int) -> dict[str, MetricChange]:
    rng = rng_for(seed)
    seconds = min(float(x.bin_widths_s.sum()) for x in (base, cand))  # 4.6 s stays 4.6 s: compared, quoted
    too_few = _unsent(base, cand) or _short("short_steady", seconds, MIN_QPS_SECONDS)

    def per_second(
        metric: str, b_counts: np.ndarray, c_counts: np.ndarray, points: tuple[float, float]
    ) -> MetricChange:
        """A rate of per-second counts (ok requests, input tokens), its interval from resampled seconds."""
        b_boot = resampled_ratios(b_counts, base.bin_widths_s, n_boot, rng)
        c_boot = resampled_ratios(c_counts, cand.bin_widths_s, n_boot, rng)
        return _change(metric, *points, interval(c_boot - b_boot), too_few)

    changes = {"qps": per_second("qps", base.ok_counts, cand.ok_counts, (base.qps, cand.qps))}
    for metric, q in LATENCY_METRICS.items():
        b, c = base.latency_sorted, cand.latency_sorted
        b_dep, c_dep = (x.p99_dependence if q == 99.0 else 1.0 for x in (base, cand))  # correlated answers
        boot = resampled_percentiles(c, q, n_boot, rng, c_dep) - resampled_percentiles(b, q, n_boot, rng, b_dep)
        why = _short("few_ok", min(base.n_ok, cand.n_ok), min_samples_for(q), q=q)
        changes[metric] = _change(metric, base.exact_ms[q], cand.exact_ms[q], interval(boot), why)
    if base.token_counts is not None and cand.token_counts is not None:
        b_tok, c_tok = base.token_counts, cand.token_counts
        points = (float(b_tok.sum() / base.bin_widths_s.sum()), float(c_tok.sum() / cand.bin_widths_s.sum()))
        changes["tokens_per_s"] = per_second("tokens_per_s", b_tok, c_tok, points)
    changes["error_rate"] = _error_rate_change(base, cand)
    if base.unavailable_s is not None and cand.unavailable_s is not None:
        changes["unavailable_s"] = _unavailable_change(base, cand, n_boot, rng, seconds)
    for metric in TELEMETRY_METRICS:
        b_vals, c_vals = base.telemetry.get(metric), cand.telemetry.get(metric)
        if b_vals is None or c_vals is None or not len(b_vals) or not len(c_vals):
            continue
        boot = resampled_means(c_vals, n_boot, rng) - resampled_means(b_vals, n_boot, rng)
        why = _short("few_telemetry", min(len(b_vals), len(c_vals)), MIN_TELEMETRY_SAMPLES)
        changes[metric] = _change(metric, float(b_vals.mean()), float(c_vals.mean()), interval(boot), why)
    return changes


def _unavailable_change(
    base: Samples, cand: Samples, n_boot: int, rng: np.random.Generator, seconds: float
) -> MetricChange:
    """Seconds without a successful answer: each run's seconds resampled (which were down is the sample)."""

    def replicates(samples: Samples) -> np.ndarray:
        down = int(samples.unavailable_s or 0)
        n = max(int(np.floor(samples.bin_widths_s.sum() + 1e-9)), down, 1)
        return resampled_means(np.r_[np.ones(down), np.zeros(n - down)], n_boot, rng) * n

    boot = replicates(cand) - replicates(base)
    points = (float(base.unavailable_s or 0), float(cand.unavailable_s or 0))
    return _change("unavailable_s", *points, interval(boot), _short("short_steady", seconds, MIN_QPS_SECONDS))


def _error_rate_change(base: Samples, cand: Samples) -> MetricChange:
    """Agresti-Caffo interval on the difference of error rates (one failure and one success added to
    each run), so 0% vs 100% over thousands of requests is not a zero-width, verdict-less interval."""
    unsent = _unsent(base, cand)
    if unsent is not None:
        return _change("error_rate", None, None, (None, None), unsent)
    pb, pc = base.n_failed / base.n_requests, cand.n_failed / cand.n_requests
    ab, ac = (base.n_failed + 1) / (base.n_requests + 2), (cand.n_failed + 1) / (cand.n_requests + 2)
    se = float(np.sqrt(ab * (1 - ab) / (base.n_requests + 2) + ac * (1 - ac) / (cand.n_requests + 2)))
    return _change("error_rate", pb, pc, (ac - ab - Z_95 * se, ac - ab + Z_95 * se))


def match_steps(
    base: dict[int, Samples], cand: dict[int, Samples]
) -> tuple[list[tuple[int, int]], list[str]]:
    """Pairs (base index, cand index) of steps at the same load, and a line per step left unpaired."""
    free = dict(cand)
    pairs, unmatched = [], []
    for index, b in sorted(base.items()):
        match = next((i for i, c in sorted(free.items()) if c.load_key == b.load_key), None)
        if match is None:
            unmatched.append(f"baseline step {b.label} has no candidate step at the same load")
            continue
        pairs.append((index, match))
        del free[match]
    unmatched += [f"candidate step {c.label} has no baseline step at the same load" for c in free.values()]
    return pairs, unmatched


def environment_mismatches(base: RunAnalysis, cand: RunAnalysis) -> list[str]:
    """Names of what differs between the runs (host, model, device, precision, scenario)."""
    b, c = base.summary, cand.summary
    b_info, c_info = b.service_info or ServiceInfo(), c.service_info or ServiceInfo()
    checks = {
        "host": (b.host.hostname, b.host.cpu_model) != (c.host.hostname, c.host.cpu_model),
        "model": b_info.model != c_info.model,
        "device": b_info.device != c_info.device,
        "precision": b_info.precision != c_info.precision,
        "scenario": (b.scenario.name, [s.stats.load for s in b.steps])
        != (c.scenario.name, [s.stats.load for s in c.steps]),
    }
    return [name for name, differs in checks.items() if differs]


def unconverged_sides(base: RunAnalysis, b_index: int, cand: RunAnalysis, c_index: int) -> list[str]:
    """Which runs' step is adaptive and reached its longest time before its P99 interval was narrow enough."""
    sides = (("baseline", base.summary, b_index), ("candidate", cand.summary, c_index))
    return [name for name, run, i in sides if any(s.stats.index == i and s.unconverged for s in run.steps)]


def uncertain_where_unconverged(metrics: dict[str, MetricChange], sides: list[str]) -> dict[str, MetricChange]:
    """A step that never converged supports no verdict: every change there carries the warning, so the gate
    says "no verdict" rather than a better or worse it cannot back."""
    if not sides:
        return metrics
    why = f"the {' and the '.join(sides)} step never converged (its P99 interval stayed wider than steps.until)"
    return {
        name: m.model_copy(update={"warning": m.warning or why, "verdict": "no_verdict"}) for name, m in metrics.items()
    }


def compare_runs(
    base: RunAnalysis, candidates: list[RunAnalysis], rules: list[GateRule] | None = None,
    n_boot: int = DEFAULT_N_BOOT, error_budget: float | None = None,
) -> Comparison:  # fmt: skip
    """Compare each candidate with the baseline; the gate always holds the candidate's error budget."""
    base_samples = step_samples(base)
    results = []
    for cand in candidates:
        cand_samples = step_samples(cand)
        pairs, unmatched = match_steps(base_samples, cand_samples)
        steps = [
            StepComparison(
                index=b_index, label=base_samples[b_index].label, base_load=base_samples[b_index].load,
                cand_load=cand_samples[c_index].load, cand_index=c_index,
                metrics=uncertain_where_unconverged(
                    compare_samples(base_samples[b_index], cand_samples[c_index], n_boot, seed=b_index + 1)
                    | cost_change(
                        base, cand, (b_index, c_index), (base_samples[b_index], cand_samples[c_index]), n_boot,
                        seed=b_index + 1, min_seconds=MIN_QPS_SECONDS,
                    ),
                    unconverged_sides(base, b_index, cand, c_index),
                ),
                base_n_ok=base_samples[b_index].n_ok, cand_n_ok=cand_samples[c_index].n_ok,
            )
            for b_index, c_index in pairs
        ]  # fmt: skip
        top = max(steps, key=lambda s: s.base_load or 0.0, default=None)  # "overall": the highest shared load
        none = StepComparison(
            index=OVERALL_INDEX, label="overall", base_load=None, cand_load=None, metrics={}, base_n_ok=0,
            cand_n_ok=0,
        )  # fmt: skip
        budget = error_budget if error_budget is not None else cand.summary.error_budget
        own = [s for _, s in sorted(cand_samples.items())]
        scopes = [BudgetScope(label=s.label, n_requests=s.n_requests, n_failed=s.n_failed) for s in own]
        results.append(
            CandidateComparison(
                run_id=cand.summary.run_id, label=cand.summary.run_id, steps=steps,
                overall=top.model_copy(update={"label": "overall"}) if top is not None else none,
                overall_step=top.label if top is not None else None,
                mismatches=environment_mismatches(base, cand), unmatched=unmatched, error_budget=budget,
                gate=evaluate_gate(rules or [], steps, scopes, budget),
            )
        )  # fmt: skip
    run_id = base.summary.run_id
    return Comparison(base_run_id=run_id, base_label=run_id, candidates=results, rules=rules or [])

"""Run comparison: per-step and overall changes with bootstrap confidence intervals and verdicts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from analysis.bootstrap import DEFAULT_N_BOOT, interval, resampled_means, resampled_percentiles, rng_for
from analysis.gate import GateRule
from analysis.steps import OUTCOME_OK, PERCENTILE_METHOD
from analysis.summary import RunAnalysis
from analysis.telemetry import GENERATOR_DEVICE, SERVICE_DEVICE

LOWER_IS_BETTER: dict[str, bool] = {
    "qps": False,
    "p50_ms": True,
    "p95_ms": True,
    "p99_ms": True,
    "error_rate": True,
    "device_util_pct": True,
    "service_cpu_pct": True,
    "mem_used_mb": True,
}
LATENCY_METRICS: dict[str, float] = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0}
Z_95 = 1.959963984540054
OVERALL_INDEX = -1


class MetricChange(BaseModel):
    """Candidate − baseline. `ci_*` bound the absolute difference; `rel` is diff / baseline."""

    metric: str
    base: float | None
    cand: float | None
    diff: float | None
    rel: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str  # "better" | "worse" | "no_sig"


class StepComparison(BaseModel):
    index: int
    label: str
    base_load: float | None
    cand_load: float | None
    metrics: dict[str, MetricChange]


class GateResult(BaseModel):
    rule: str
    scope: str
    metric: str
    failed: bool
    change: MetricChange


class CandidateComparison(BaseModel):
    run_id: str
    label: str
    steps: list[StepComparison]
    overall: StepComparison
    mismatches: list[str]
    gate: list[GateResult] = []

    @property
    def gate_failed(self) -> bool:
        return any(g.failed for g in self.gate)


class Comparison(BaseModel):
    base_run_id: str
    base_label: str
    candidates: list[CandidateComparison]
    rules: list[GateRule]
    percentile_method: str = PERCENTILE_METHOD

    @property
    def gate_failed(self) -> bool:
        return any(c.gate_failed for c in self.candidates)


@dataclass
class Samples:
    """What a comparison resamples for one step (or the whole run)."""

    label: str
    load: float | None
    latency_sorted: np.ndarray
    per_second_counts: np.ndarray
    qps: float
    n_requests: int
    n_failed: int
    telemetry: dict[str, np.ndarray]


def _per_second(ts: np.ndarray, start: float, end: float) -> np.ndarray:
    n_sec = int(np.floor(end - start))
    if n_sec < 1:
        return np.array([])
    offset = np.floor(ts - start)
    offset = offset[(offset >= 0) & (offset < n_sec)].astype(np.int64)
    return np.bincount(offset, minlength=n_sec).astype(np.float64)


def _telemetry_samples(analysis: RunAnalysis, start: float, end: float) -> dict[str, np.ndarray]:
    """Per-second means of each resource metric within the window."""
    index = analysis.telemetry
    out: dict[str, np.ndarray] = {}
    picks = (
        ("device_util_pct", index.accelerator, None, "device_util_pct"),
        ("mem_used_mb", index.accelerator, None, "mem_used_mb"),
        ("service_cpu_pct", index.other, SERVICE_DEVICE, "cpu_util_pct"),
        ("generator_cpu_pct", index.other, GENERATOR_DEVICE, "cpu_util_pct"),
    )
    for name, frame, device, metric in picks:
        if not len(frame):
            continue
        ts = frame["ts_unix_s"].to_numpy()
        lo, hi = np.searchsorted(ts, start, side="left"), np.searchsorted(ts, end, side="right")
        sub = frame.iloc[lo:hi]
        mask = sub["metric"].astype(str).to_numpy() == metric
        if device is not None:
            mask &= sub["device"].astype(str).to_numpy() == device
        sub = sub[mask]
        if len(sub):
            out[name] = sub.groupby(np.floor(sub["ts_unix_s"].to_numpy()))["value"].mean().to_numpy()
    return out


def step_samples(analysis: RunAnalysis) -> dict[int, Samples]:
    """Samples per stage index, plus OVERALL_INDEX for all steady rows together."""
    prepared, out = analysis.prepared, {}
    rows = prepared.rows
    counted_all = ~rows["probe"].to_numpy()
    for step in analysis.summary.steps:
        s = step.stats
        sub = rows.iloc[prepared.slices[s.index]]
        counted = ~sub["probe"].to_numpy()
        ok = (sub["outcome"].to_numpy() == OUTCOME_OK) & counted
        out[s.index] = Samples(
            label=s.label,
            load=s.load,
            latency_sorted=np.sort(sub["latency_ms"].to_numpy()[ok]),
            per_second_counts=_per_second(
                sub["t_sent_unix_s"].to_numpy()[counted], s.steady_start_unix_s, s.steady_end_unix_s
            ),
            qps=s.qps,
            n_requests=s.n_requests,
            n_failed=s.n_error + s.n_timeout,
            telemetry=_telemetry_samples(analysis, s.steady_start_unix_s, s.steady_end_unix_s),
        )
    ok_all = (rows["outcome"].to_numpy() == OUTCOME_OK) & counted_all
    peak = max(analysis.summary.steps, key=lambda st: st.stats.qps, default=None)
    peak_samples = out.get(peak.stats.index) if peak is not None else None
    out[OVERALL_INDEX] = Samples(
        label="overall",
        load=None,
        latency_sorted=np.sort(rows["latency_ms"].to_numpy()[ok_all]),
        per_second_counts=peak_samples.per_second_counts if peak_samples else np.array([]),
        qps=peak_samples.qps if peak_samples else 0.0,
        n_requests=int(counted_all.sum()),
        n_failed=int((counted_all & ~ok_all).sum()),
        telemetry=peak_samples.telemetry if peak_samples else {},
    )
    return out


def _verdict(metric: str, low: float | None, high: float | None) -> str:
    if low is None or high is None or (low <= 0.0 <= high):
        return "no_sig"
    rose = low > 0.0
    return "worse" if rose == LOWER_IS_BETTER[metric] else "better"


def _change(
    metric: str, base: float | None, cand: float | None, ci: tuple[float | None, float | None]
) -> MetricChange:
    diff = cand - base if base is not None and cand is not None else None
    rel = diff / base if diff is not None and base else None
    return MetricChange(
        metric=metric, base=base, cand=cand, diff=diff, rel=rel, ci_low=ci[0], ci_high=ci[1],
        verdict=_verdict(metric, *ci),
    )  # fmt: skip


def compare_samples(base: Samples, cand: Samples, n_boot: int, seed: int) -> dict[str, MetricChange]:
    rng = rng_for(seed)
    changes: dict[str, MetricChange] = {}
    b_mean = resampled_means(base.per_second_counts, n_boot, rng)
    c_mean = resampled_means(cand.per_second_counts, n_boot, rng)
    changes["qps"] = _change("qps", base.qps, cand.qps, interval(c_mean - b_mean))
    for metric, q in LATENCY_METRICS.items():
        b, c = base.latency_sorted, cand.latency_sorted
        point_b = float(np.percentile(b, q, method=PERCENTILE_METHOD)) if len(b) else None
        point_c = float(np.percentile(c, q, method=PERCENTILE_METHOD)) if len(c) else None
        boot = resampled_percentiles(c, q, n_boot, rng) - resampled_percentiles(b, q, n_boot, rng)
        changes[metric] = _change(metric, point_b, point_c, interval(boot))
    changes["error_rate"] = _error_rate_change(base, cand)
    for metric in ("device_util_pct", "service_cpu_pct", "mem_used_mb"):
        b_vals, c_vals = base.telemetry.get(metric), cand.telemetry.get(metric)
        if b_vals is None or c_vals is None or not len(b_vals) or not len(c_vals):
            continue
        boot = resampled_means(c_vals, n_boot, rng) - resampled_means(b_vals, n_boot, rng)
        changes[metric] = _change(metric, float(b_vals.mean()), float(c_vals.mean()), interval(boot))
    return changes


def _error_rate_change(base: Samples, cand: Samples) -> MetricChange:
    """Two-proportion normal interval on the difference of error rates."""
    if not base.n_requests or not cand.n_requests:
        return _change("error_rate", None, None, (None, None))
    pb, pc = base.n_failed / base.n_requests, cand.n_failed / cand.n_requests
    se = float(np.sqrt(pb * (1 - pb) / base.n_requests + pc * (1 - pc) / cand.n_requests))
    ci = (pc - pb - Z_95 * se, pc - pb + Z_95 * se) if se > 0 else (0.0, 0.0)
    return _change("error_rate", pb, pc, ci)


def environment_mismatches(base: RunAnalysis, cand: RunAnalysis) -> list[str]:
    """Names of what differs between the runs (host, model, device, precision, scenario)."""
    b, c = base.summary, cand.summary
    b_info, c_info = b.service_info or {}, c.service_info or {}
    checks = {
        "host": (b.host.get("hostname"), b.host.get("cpu")) != (c.host.get("hostname"), c.host.get("cpu")),
        "model": b_info.get("model") != c_info.get("model"),
        "device": b_info.get("device") != c_info.get("device"),
        "scenario": (b.scenario.get("name"), [s.stats.load for s in b.steps])
        != (c.scenario.get("name"), [s.stats.load for s in c.steps]),
    }
    return [name for name, differs in checks.items() if differs]


def evaluate_gate(rules: list[GateRule], comparison: CandidateComparison) -> list[GateResult]:
    results = []
    for scope in [*comparison.steps, comparison.overall]:
        for rule in rules:
            change = scope.metrics.get(rule.metric)
            if change is None:
                continue
            failed = rule.crossed(change.diff, change.rel) and change.verdict != "no_sig"
            results.append(
                GateResult(
                    rule=rule.text, scope=scope.label, metric=rule.metric, failed=failed, change=change
                )
            )
    return results


def overall_metrics(
    base: RunAnalysis, base_samples: dict[int, Samples], cand_samples: dict[int, Samples], n_boot: int
) -> dict[str, MetricChange]:
    """QPS at each run's peak, errors over all steps, latency at the baseline's peak step in both runs.

    Latency pooled over all steps would mix loads: a candidate that serves more requests at the high
    steps would look slower overall even if it were faster at every step. So the overall latency
    change is measured at one load, the one where the baseline peaked, matched by stage index.
    """
    metrics = compare_samples(base_samples[OVERALL_INDEX], cand_samples[OVERALL_INDEX], n_boot, seed=0)
    peak = max(base.summary.steps, key=lambda st: st.stats.qps, default=None)
    if peak is None or peak.stats.index not in cand_samples:
        for metric in LATENCY_METRICS:
            metrics.pop(metric, None)
        return metrics
    index = peak.stats.index
    at_peak = compare_samples(base_samples[index], cand_samples[index], n_boot, seed=index + 1)
    for metric in LATENCY_METRICS:
        if metric in at_peak:
            metrics[metric] = at_peak[metric]
    return metrics


def compare_runs(
    base: RunAnalysis,
    candidates: list[RunAnalysis],
    rules: list[GateRule] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
) -> Comparison:
    base_samples = step_samples(base)
    results = []
    for cand in candidates:
        cand_samples = step_samples(cand)
        steps = []
        for index, b in base_samples.items():
            c = cand_samples.get(index)
            if c is None or index == OVERALL_INDEX:
                continue
            steps.append(
                StepComparison(
                    index=index, label=b.label, base_load=b.load, cand_load=c.load,
                    metrics=compare_samples(b, c, n_boot, seed=index + 1),
                )
            )  # fmt: skip
        overall = StepComparison(
            index=OVERALL_INDEX,
            label="overall",
            base_load=None,
            cand_load=None,
            metrics=overall_metrics(base, base_samples, cand_samples, n_boot),
        )
        comparison = CandidateComparison(
            run_id=cand.summary.run_id,
            label=cand.summary.run_id,
            steps=steps,
            overall=overall,
            mismatches=environment_mismatches(base, cand),
        )
        comparison.gate = evaluate_gate(rules or [], comparison)
        results.append(comparison)
    return Comparison(
        base_run_id=base.summary.run_id,
        base_label=base.summary.run_id,
        candidates=results,
        rules=rules or [],
    )

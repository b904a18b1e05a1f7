"""What the run report shows above and beside the tables: headline, bottlenecks, energy, device plan.

The summary's sections are read through `field`, so a report renders from a run folder written by
an older or newer writer (a missing section is "n/a", never a template error).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from analysis.figures.bottleneck import Bottleneck, step_bottleneck
from analysis.figures.capacity import DEFAULT_HEADROOM, DevicePlan, higher_load_override
from analysis.run.summary import RunAnalysis, RunSummary


def field(obj: Any, name: str, default: Any = None) -> Any:
    """obj.name or obj[name], default when absent or None (typed sections and their older dict form)."""
    if obj is None:
        return default
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return default if value is None else value


def goodput(stats: Any) -> float:
    """Successful requests per second of a step (goodput), whatever the summary's vintage."""
    return float(field(stats, "goodput_qps", field(stats, "ok_qps", field(stats, "qps", 0.0))))


class Energy(BaseModel):
    """Serving-device energy per unit of useful work, from mean total power and goodput."""

    index: int
    power_w: float
    embeddings_per_s: float
    tokens_per_s: float | None
    j_per_1k_embeddings: float | None
    j_per_1m_tokens: float | None


class Headline(BaseModel):
    """The answer a reviewer reads first."""

    max_qps: float | None
    at_p99_ms: float | None
    slo_p99_ms: float | None
    devices: int
    serving: list[str]
    serving_rule: str
    slo_verdict: str
    peak_qps: float | None
    peak_p99_ms: float | None
    generator_bound: bool
    generator_max_pct: float | None
    incomplete: bool
    n_requests: int
    n_ok: int
    # summary.capacity.lower_bound, the field `embedperf capacity` reads too: max_qps is "at least"
    lower_bound: bool = False
    highest_label: str | None = None  # the highest-load step, which still met the SLO (lower bound only)
    next_override: str | None = None  # the `--set` that reruns that step at higher load (lower bound only)


def headline(summary: RunSummary, bottlenecks: list[Bottleneck]) -> Headline:
    cap = summary.capacity
    by_index = {s.stats.index: s for s in summary.steps}
    best = by_index.get(cap.max_step_index) if cap.max_step_index is not None else None
    peak = max(summary.steps, key=lambda s: goodput(s.stats), default=None)
    device = field(summary.service_info, "device")
    serving = [str(d) for d in field(summary, "serving_devices", [])] or ([str(device)] if device else [])
    totals = field(summary, "totals")
    n_requests = field(totals, "n_requests", sum(s.stats.n_requests for s in summary.steps))
    n_ok = field(totals, "n_ok", sum(s.stats.n_ok for s in summary.steps))
    generator = summary.generator_cpu
    lower_bound = bool(field(cap, "lower_bound", False)) and best is not None
    top = by_index.get(field(cap, "highest_step_index")) if lower_bound else None
    return Headline(
        max_qps=goodput(best.stats) if best else None,
        at_p99_ms=best.stats.latency.p99_ms if best else None,
        slo_p99_ms=summary.slo_p99_ms,
        devices=summary.devices_in_run,
        serving=serving,
        serving_rule=str(field(summary, "serving_rule", "none")),
        slo_verdict="no_verdict" if summary.slo_verdict == "none" else summary.slo_verdict,
        peak_qps=goodput(peak.stats) if peak else None,
        peak_p99_ms=peak.stats.latency.p99_ms if peak else None,
        generator_bound=bool(generator.saturated) or any(b.kind == "generator" for b in bottlenecks),
        generator_max_pct=generator.max_pct,
        incomplete=not summary.complete,
        n_requests=int(n_requests),
        n_ok=int(n_ok),
        lower_bound=lower_bound,
        highest_label=top.stats.label if top else None,
        next_override=higher_load_override(top.stats) if top and summary.search is None else None,
    )


def bottlenecks(summary: RunSummary) -> list[Bottleneck]:
    cores = int(field(summary.host, "cpu_cores_logical", 0)) or None
    return [step_bottleneck(s.stats, s.telemetry, s.decomposition, cores) for s in summary.steps]


def energy(analysis: RunAnalysis) -> list[Energy]:
    """Per step where serving-device power was measured: J per 1,000 embeddings and per 1M input tokens."""
    out = []
    for step in analysis.summary.steps:
        power_w = step.telemetry.power_total_mean_w
        s = step.stats
        if power_w is None or s.n_ok == 0 or s.duration_s <= 0:
            continue
        emb_per_s = analysis.figures.embeddings.get(s.index, float(s.n_ok)) / s.duration_s
        n_tokens = analysis.figures.tokens.get(s.index)
        tok_per_s = n_tokens / s.duration_s if n_tokens else None
        out.append(Energy(
            index=s.index, power_w=power_w, embeddings_per_s=emb_per_s, tokens_per_s=tok_per_s,
            j_per_1k_embeddings=power_w / emb_per_s * 1000.0 if emb_per_s > 0 else None,
            j_per_1m_tokens=power_w / tok_per_s * 1e6 if tok_per_s else None,
        ))  # fmt: skip
    return out


def target_plan(summary: RunSummary) -> DevicePlan | None:
    """Devices for the scenario's slo.target_qps (or the plan the analysis already made)."""
    target = field(field(summary.scenario, "slo"), "target_qps")
    if summary.capacity.plan is not None or target is None:
        return summary.capacity.plan
    return summary.capacity.plan_for(summary.devices_in_run, float(target), DEFAULT_HEADROOM)

"""The cost change between two runs' steps at the same load, with a bootstrap interval.

A step's cost per million embeddings is its hourly cost over its embeddings per hour (analysis.figures.cost).
The hourly cost is a price list applied to what ran, so the interval comes from the throughput alone: the
same per-second goodput replicates the qps change resamples, scaled by each run's embeddings per ok request.
"""

from __future__ import annotations

import numpy as np

from analysis.compare.model import MetricChange, Samples
from analysis.figures.bootstrap import interval, resampled_ratios, rng_for
from analysis.run.summary import RunAnalysis
from embedperf.verdicts import change_verdict
from scenarios.cost_models import PER_MILLION

COST_METRIC = "cost_per_1m_embeddings"


def _replicates(
    run: RunAnalysis, index: int, samples: Samples, n_boot: int, rng: np.random.Generator
) -> tuple[float, np.ndarray] | None:
    cost = run.summary.cost
    step = cost.step(index) if cost is not None else None
    if step is None or step.hourly is None or step.per_1m_embeddings is None or samples.qps <= 0:
        return None
    per_request = step.embeddings_per_s / samples.qps
    qps = resampled_ratios(samples.ok_counts, samples.bin_widths_s, n_boot, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = step.hourly / (qps * per_request * 3600.0) * PER_MILLION
    return step.per_1m_embeddings, boot


def cost_change(
    base: RunAnalysis, cand: RunAnalysis, indexes: tuple[int, int], samples: tuple[Samples, Samples],
    n_boot: int, seed: int, min_seconds: int,
) -> dict[str, MetricChange]:  # fmt: skip
    """{COST_METRIC: change} when both steps are costed in one currency, else {} (no price: no figure)."""
    b_cost, c_cost = base.summary.cost, cand.summary.cost
    if b_cost is None or c_cost is None:
        return {}
    rng = rng_for(seed)
    b = _replicates(base, indexes[0], samples[0], n_boot, rng)
    c = _replicates(cand, indexes[1], samples[1], n_boot, rng)
    if b is None or c is None:
        return {}
    warning = None
    if b_cost.prices.currency != c_cost.prices.currency:
        warning = f"the runs are priced in {b_cost.prices.currency} and {c_cost.prices.currency}"
    elif min(len(samples[0].ok_counts), len(samples[1].ok_counts)) < min_seconds:
        warning = f"fewer than {min_seconds} s of steady state: too few for a throughput interval"
    low, high = interval(c[1] - b[1])
    diff = c[0] - b[0]
    verdict = change_verdict(low, high, lower_is_better=True, unsupported=warning is not None)
    change = MetricChange(
        metric=COST_METRIC, base=b[0], cand=c[0], diff=diff, rel=diff / b[0] if b[0] else None, ci_low=low,
        ci_high=high, verdict=verdict, warning=warning,
    )  # fmt: skip
    return {COST_METRIC: change}

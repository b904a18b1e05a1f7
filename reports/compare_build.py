"""Build the comparison report (baseline vs one or more candidates) as one self-contained HTML file."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from analysis.compare.changes import Comparison, compare_runs
from analysis.compare.gate import GateRule
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.schema import RunFolder
from reports.build import check_lang, write_html
from reports.compare_text import change_warning, failure_lines, gate_reason
from reports.config_diff import config_difference
from reports.figures import figure_lang, log_scale, new_figure, style, to_data_uri
from reports.i18n import t
from reports.render import render
from reports.view import goodput
from scenarios.cost_models import Cost

COMPARE_METRICS: tuple[str, ...] = (
    "qps", "tokens_per_s", "p50_ms", "p95_ms", "p99_ms", "error_rate", "device_util_pct", "service_cpu_pct",
    "mem_used_mb", "unavailable_s", "cost_per_1m_embeddings",
)  # fmt: skip


def load_curves(
    runs: list[RunAnalysis], lang: str, names: list[str] | None = None, log_p99: bool = False
) -> str:
    """QPS and P99 against load, one line per run (the first drawn heavier: it is the baseline)."""
    flang = figure_lang(lang)
    if names is None:
        ids = [r.summary.run_id for r in runs]
        names = [f"{t('candidate' if i else 'baseline', flang)}: {run_id}" for i, run_id in enumerate(ids)]
    with style(flang):
        fig, (ax_qps, ax_p99) = new_figure((11, 3.6), 1, 2)
        for i, (run, name) in enumerate(zip(runs, names, strict=True)):
            steps = run.summary.steps
            x = np.array([s.stats.load for s in steps])
            width = 2.2 if i == 0 else 1.4
            ax_qps.plot(x, [goodput(s.stats) for s in steps], marker="o", label=name, lw=width)
            p99 = [np.nan if s.stats.latency.p99_ms is None else s.stats.latency.p99_ms for s in steps]
            ax_p99.plot(x, p99, marker="o", label=name, lw=width)
        ax_qps.set_title(t("fig_throughput", flang))
        ax_qps.set_ylabel(t("qps", flang))
        ax_p99.set_title("P99")
        ax_p99.set_ylabel(t("latency_ms", flang))
        if log_p99:
            log_scale(ax_p99, "y")
        for ax in (ax_qps, ax_p99):
            ax.set_xlabel(t("load", flang))
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, ncol=2 if len(runs) > 4 else 1)
        return to_data_uri(fig)


def render_comparison(comparison: Comparison, runs: list[RunAnalysis], lang: str) -> str:
    base, *others = (r.summary for r in runs)
    return render(
        "compare.html.j2", lang, comparison=comparison, gate_reason=partial(gate_reason, lang=lang),
        change_warning=partial(change_warning, lang=lang), failure_lines=partial(failure_lines, lang=lang),
        metrics=COMPARE_METRICS, figure=load_curves(runs, lang), runs=[base, *others],
        differences=[config_difference(base.service_info, base.host, s.service_info, s.host) for s in others],
    )  # fmt: skip


def default_compare_path(base: RunFolder, candidate: RunFolder) -> Path:
    return candidate.root / f"compare-{base.run_id}.html"


def build_comparison(
    base: RunFolder, candidates: list[RunFolder], rules: list[GateRule] | None = None, lang: str = "en",
    out: Path | None = None, error_budget: float | None = None, cost: Cost | None = None,
) -> tuple[Path, Comparison]:  # fmt: skip
    """Write the comparison HTML (default CAND/compare-<base_id>.html); return its path and the comparison."""
    check_lang(lang)
    base_analysis = analyse_folder(base, cost=cost)
    cand_analyses = [analyse_folder(c, cost=cost) for c in candidates]
    comparison = compare_runs(base_analysis, cand_analyses, rules, error_budget=error_budget)
    path = out or default_compare_path(base, candidates[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_html(path, render_comparison(comparison, [base_analysis, *cand_analyses], lang))
    return path, comparison

"""The matrix report: every configuration against the baseline, with CIs, precision, a recommendation and the
cheapest configuration at the SLO."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.compare.changes import MetricChange, compare_runs
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from decisions.search.state import SearchSummary
from embedperf.errors import RunFolderError
from embedperf.schema import RunFolder
from embedperf.verdicts import ChangeVerdict
from reports.build import check_lang, write_html
from reports.compare_build import load_curves
from reports.render import render
from study.matrix.run import MatrixRecord, changes_numerics
from study.matrix.spec import MatrixSpec

MATRIX_REPORT = "matrix.html"
HEADLINE_METRICS = (
    "qps", "tokens_per_s", "p50_ms", "p99_ms", "device_util_pct", "service_cpu_pct", "mem_used_mb",
)  # fmt: skip


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


@dataclass
class MergedChange:
    """One metric's change over all repeats: per-repeat changes and the combined verdict."""

    metric: str
    repeats: list[MetricChange]
    verdict: ChangeVerdict


@dataclass
class ConfigRow:
    name: str
    description: str
    service_args: list[str]
    runs: list[RunAnalysis]
    precision: dict[str, Any] | None
    is_baseline: bool
    needs_precision_check: bool = False
    overall: dict[str, MergedChange] = field(default_factory=dict)
    steps: list[tuple[str, dict[str, MergedChange]]] = field(default_factory=list)

    @property
    def precision_ok(self) -> bool:
        """Passed the check; a configuration that changes numerics and was not checked has not passed."""
        if self.precision is not None:
            return bool(self.precision.get("passed"))
        return not self.needs_precision_check

    @property
    def qps_within_budget(self) -> float | None:
        """Most QPS of a step whose error rate is within the run's budget, whatever its latency (every repeat)."""
        values = []
        for run in self.runs:
            budget = run.summary.error_budget
            ok = [
                s.stats.qps
                for s in run.summary.steps
                if s.stats.error_rate is not None and s.stats.error_rate <= budget and s.stats.qps > 0
            ]
            if ok:
                values.append(max(ok))
        return _median(values) if len(values) == len(self.runs) else None

    @property
    def qps_at_slo(self) -> float | None:
        return _median([v for r in self.runs if (v := r.summary.capacity.max_qps_meeting_slo) is not None])

    @property
    def cache_hit_ratio(self) -> float | None:
        """Mean hit ratio the service reported while its cache was on (absent without a cache)."""
        values = []
        for run in self.runs:
            tel = run.telemetry.other
            if len(tel) and "metric" in tel:
                hits = tel.loc[tel["metric"] == "cache_hit_ratio", "value"]
                if len(hits):
                    values.append(float(hits.mean()))
        return _median(values)

    @property
    def searches(self) -> list[SearchSummary]:
        return [r.summary.search for r in self.runs if r.summary.search is not None]

    @property
    def searched_rps(self) -> float | None:
        """Searched capacity per device (None when no repeat found one)."""
        return _median([s.per_device_rps for s in self.searches if s.per_device_rps is not None])

    @property
    def searched_bracket(self) -> tuple[float | None, float | None]:
        """Per device, the union of every repeat's final bracket: the searched capacity's uncertainty."""
        lows = [s.bracket[0] / s.devices for s in self.searches if s.bracket[0] is not None]
        highs = [s.bracket[1] / s.devices for s in self.searches if s.bracket[1] is not None]
        all_bounded = len(highs) == len(self.searches)
        return (min(lows) if lows else None, max(highs) if highs and all_bounded else None)

    @property
    def searched_p99_ms(self) -> float | None:
        return _median([s.p99_ms for s in self.searches if s.p99_ms is not None])

    @property
    def search_status(self) -> str:
        statuses = {s.status for s in self.searches}
        return statuses.pop() if len(statuses) == 1 else ("mixed" if statuses else "none")

    @property
    def peak_qps(self) -> float | None:
        return _median([v for r in self.runs if (v := r.summary.capacity.peak_qps) is not None])


@dataclass(frozen=True)
class Cheapest:
    name: str
    per_1m_embeddings: float
    currency: str
    qps_at_slo: float | None


def cost_at_slo(row: ConfigRow) -> tuple[float, str] | None:
    """Median cost per million embeddings at the capacity step over the repeats (analysis.figures.cost), and
    its currency; None unless every run is priced (a `cost` block in the matrix's overrides)."""
    values, currencies = [], set()
    for run in row.runs:
        cost, index = run.summary.cost, run.summary.capacity.max_step_index
        step = cost.step(index) if cost is not None and index is not None else None
        if cost is None or step is None or step.per_1m_embeddings is None:
            return None
        values.append(step.per_1m_embeddings)
        currencies.add(cost.prices.currency)
    if not values or len(currencies) != 1:
        return None
    return float(np.median(values)), currencies.pop()


def cheapest(rows: list[ConfigRow]) -> Cheapest | None:
    """The priced configuration passing the precision gate with the lowest cost per million embeddings."""
    priced = [
        (row, c) for row in rows if row.runs and row.precision_ok and (c := cost_at_slo(row)) is not None
    ]
    if not priced or len({c[1] for _, c in priced}) != 1:
        return None
    row, (per_1m, currency) = min(priced, key=lambda item: item[1][0])
    return Cheapest(name=row.name, per_1m_embeddings=per_1m, currency=currency, qps_at_slo=row.qps_at_slo)


def merge_verdicts(changes: list[MetricChange]) -> ChangeVerdict:
    """A verdict only when every repeat agrees; repeats that disagree (drift) or could not judge give none."""
    verdicts = {c.verdict for c in changes}
    return verdicts.pop() if len(verdicts) == 1 else "no_verdict"


def _merge(per_repeat: list[dict[str, MetricChange]]) -> dict[str, MergedChange]:
    merged = {}
    for metric in HEADLINE_METRICS:
        if changes := [m[metric] for m in per_repeat if metric in m]:
            merged[metric] = MergedChange(metric, changes, merge_verdicts(changes))
    return merged


def load_rows(folder: Path, record: MatrixRecord) -> list[ConfigRow]:
    spec = MatrixSpec.model_validate(record.spec)
    rows = []
    for i, config in enumerate(spec.configurations):
        done = (r for r in record.runs if r.config == config.name and r.ok and r.run_dir)
        runs = sorted(done, key=lambda r: r.repeat)
        row = ConfigRow(
            name=config.name,
            description=config.description,
            service_args=runs[0].service_args if runs else [],
            runs=[analyse_folder(RunFolder(folder / str(r.run_dir))) for r in runs],
            precision=record.precision.get(config.name),
            is_baseline=i == 0,
            needs_precision_check=changes_numerics(spec.service_settings(config)),
        )
        rows.append(row)
    return rows


def attach_changes(rows: list[ConfigRow]) -> None:
    """Compare each configuration's repeat r with the baseline's repeat r (same round, same drift)."""
    baseline = rows[0]
    if not baseline.runs:
        raise RunFolderError("the baseline configuration has no completed run; nothing to compare against")
    for row in rows[1:]:
        per_overall: list[dict[str, MetricChange]] = []
        per_step: dict[int, list[dict[str, MetricChange]]] = {}
        labels: dict[int, str] = {}
        for r, cand in enumerate(row.runs):
            base = baseline.runs[min(r, len(baseline.runs) - 1)]
            comparison = compare_runs(base, [cand]).candidates[0]
            per_overall.append(comparison.overall.metrics)
            for step in comparison.steps:
                per_step.setdefault(step.index, []).append(step.metrics)
                labels[step.index] = step.label
        row.overall = _merge(per_overall)
        row.steps = [(labels[i], _merge(per_step[i])) for i in sorted(per_step)]


def ranked_by_search(rows: list[ConfigRow]) -> list[ConfigRow]:
    """Configurations by searched capacity per device, highest first; those without an answer last."""
    return sorted(rows, key=lambda r: -(r.searched_rps if r.searched_rps is not None else -1.0))


def recommend(rows: list[ConfigRow], measure: str = "steps") -> tuple[ConfigRow | None, str]:
    """The most QPS at the SLO (by search: the searched capacity) among the precision_ok configurations; when
    none meets it, the most QPS within the error budget, never a load where too many requests fail."""
    eligible = [r for r in rows if r.runs and r.precision_ok]
    if measure == "search" and (searched := [r for r in eligible if r.searched_rps is not None]):
        return ranked_by_search(searched)[0], "search"
    if at_slo := [r for r in eligible if r.qps_at_slo is not None]:  # meets_slo includes the error budget
        return max(at_slo, key=lambda r: r.qps_at_slo or 0.0), "slo"
    if in_budget := [r for r in eligible if r.qps_within_budget is not None]:
        return max(in_budget, key=lambda r: r.qps_within_budget or 0.0), "peak"
    return None, "none"


def overlay_figure(rows: list[ConfigRow], lang: str) -> str:
    """Every configuration's first repeat on one QPS / P99 figure."""
    shown = [row for row in rows if row.runs]
    return load_curves([row.runs[0] for row in shown], lang, names=[row.name for row in shown], log_p99=True)


def build_matrix_report(folder: Path, lang: str = "en") -> Path:
    check_lang(lang)
    record = MatrixRecord.read(folder)
    rows = load_rows(folder, record)
    attach_changes(rows)
    measure = MatrixSpec.model_validate(record.spec).measure
    best, basis = recommend(rows, measure)
    slo = rows[0].runs[0].summary if rows[0].runs else None
    html = render(
        "matrix.html.j2",
        lang,
        record=record,
        rows=rows,
        best=best,
        basis=basis,
        cheapest=cheapest(rows),
        failed_precision=[r.name for r in rows if not r.precision_ok],
        failed_runs=[r for r in record.runs if not r.ok],
        slo_p99_ms=slo.slo_p99_ms if slo else None,
        error_budget=slo.error_budget if slo else None,
        figure=overlay_figure(rows, lang),
        metrics=HEADLINE_METRICS,
        measure=measure,
        ranked=ranked_by_search(rows) if measure == "search" else [],
    )
    return write_html(folder / MATRIX_REPORT, html)

"""Build RUN_DIR/report.html (and RUN_DIR/analysis/*) from a run folder alone."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from analysis.compare.quality_gate import quality_gate
from analysis.engine.minute_series import THROTTLE_DROP_FRACTION, THROTTLE_TEMP_RISE_C
from analysis.figures.capacity import DEFAULT_HEADROOM, LITTLE_MISMATCH
from analysis.figures.health import HealthCheck
from analysis.figures.quality import Finding
from analysis.figures.soak import DRIFT_MAX_PCT_PER_H, LEAK_MIN_MB_PER_H, LEAK_MIN_PCT_PER_H
from analysis.model.decomposition import COMPONENTS
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis, write_analysis
from embedperf.errors import ConfigError
from embedperf.files import write_atomically as write_html
from embedperf.options import LANGS
from embedperf.schema import RunFolder, ServiceInfo
from reports.canary_section import canary_section
from reports.figures import run_figures
from reports.i18n import error_kind_text, reason_text, t
from reports.render import num, pct, render
from reports.search_section import search_section
from reports.tables import CAPPED_MARK, bottleneck_rows, telemetry_rows
from reports.view import bottlenecks, energy, field, goodput, headline, target_plan
from scenarios.cost_models import Cost

TOP_ERRORS = 10
PLAN_REFERENCE_QPS = 1000.0
# Step warning code -> the mark shown beside the step (explained in the table's legend).
WARNING_MARKS: dict[str, str] = {"no_samples": "0", "few_samples_p99": "1", "few_samples_p999": "2"}
# The thresholds of the per-minute soak findings (analysis.engine.minute_series.soak_findings), for their note.
SOAK_LIMITS: dict[str, float] = {
    "drift_pct": DRIFT_MAX_PCT_PER_H,
    "leak_mb_per_h": LEAK_MIN_MB_PER_H,
    "leak_pct": LEAK_MIN_PCT_PER_H,
    "temp_rise_c": THROTTLE_TEMP_RISE_C,
    "drop_pct": THROTTLE_DROP_FRACTION * 100.0,
}


def _finding_text(finding: Finding, lang: str) -> str:
    params = {k: (num(v, 1) if isinstance(v, float) else v) for k, v in finding.params.items()}
    if "reason" in params:
        params["reason"] = reason_text(str(params["reason"]), lang)
    if "status" in params:
        params["status"] = t(f"src_{params['status']}", lang)
    return t(f"f_{finding.code}", lang, **params)


def _health_limit(check: HealthCheck) -> str:
    return pct(check.limit, 3) if check.name == "error_rate" else num(check.limit, 0)


def _health_value(check: HealthCheck) -> str:
    return pct(check.value, 3) if check.name == "error_rate" else num(check.value, 1)


def read_precision(folder: RunFolder) -> dict[str, Any] | None:
    """The precision check stored beside the run, if one was made (embedperf precision --run / matrix)."""
    try:
        data = json.loads(folder.precision.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _marks(analysis: RunAnalysis) -> dict[str, str]:
    """The warning marks that occur in this report, for its legend."""
    seen = {w for s in analysis.summary.steps for w in s.stats.warnings}
    return {w: m for w, m in WARNING_MARKS.items() if w in seen} | {
        w: str(len(WARNING_MARKS) + i) for i, w in enumerate(sorted(seen - WARNING_MARKS.keys()))
    }


def render_run_report(analysis: RunAnalysis, lang: str, precision: dict[str, Any] | None = None) -> str:
    summary = analysis.summary
    labels = {s.stats.index: s.stats.label for s in summary.steps}
    steps_bottlenecks = bottlenecks(summary)
    per_1k = summary.capacity.plan_for(summary.devices_in_run, PLAN_REFERENCE_QPS, DEFAULT_HEADROOM)
    cols = {"tokens": "tokens_per_s", "documents": "documents_per_s", "cosine": "quality_cosine_mean"}
    extras = {key: any(field(s.stats, col) is not None for s in summary.steps) for key, col in cols.items()}
    start_s, end_s = summary.start_unix_s, summary.end_unix_s
    duration_s = end_s - start_s if end_s is not None and start_s is not None else None
    return render(
        "report.html.j2", lang, summary=summary, info=summary.service_info or ServiceInfo(),
        headline=headline(summary, steps_bottlenecks), bottlenecks=steps_bottlenecks,
        bottleneck_table=bottleneck_rows(summary, steps_bottlenecks),  # (rows, capped shares)
        telemetry_table=telemetry_rows(summary), capped_mark=CAPPED_MARK, energy=energy(analysis),
        plan=target_plan(summary), per_1k=per_1k, extras=extras, marks=_marks(analysis),
        error_kind=partial(error_kind_text, lang=lang), little_tol=LITTLE_MISMATCH,
        health_limit=_health_limit, health_value=_health_value, reason=partial(reason_text, lang=lang),
        goodput=goodput, manifest_extra=analysis.manifest, figures=run_figures(analysis, lang),
        search=search_section(analysis, lang), lengths=analysis.figures.lengths,
        canary=canary_section(analysis.folder, analysis.manifest, lang),
        quality=quality_gate(summary, analysis.manifest), components=COMPONENTS, duration_s=duration_s,
        step_label=lambda index: labels.get(index, str(index)),
        finding=partial(_finding_text, lang=lang), top_errors=analysis.figures.top_errors[:TOP_ERRORS],
        precision=precision, soak_limits=SOAK_LIMITS,
    )  # fmt: skip


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ConfigError(f"unknown language {lang!r}; choose one of {', '.join(LANGS)}")
    return lang


def default_report_path(folder: RunFolder, lang: str) -> Path:
    """RUN_DIR/report.html in English, RUN_DIR/report.<lang>.html beside it otherwise (never over it)."""
    return folder.report if lang == "en" else folder.root / f"report.{lang}.html"


def build_report(
    folder: RunFolder, lang: str = "en", slo_p99_ms: float | None = None, out: Path | None = None,
    cost: Cost | None = None,
) -> Path:  # fmt: skip
    """Write the report (default RUN_DIR/report[.lang].html) and RUN_DIR/analysis/*; return the report path."""
    check_lang(lang)
    analysis = analyse_folder(folder, slo_p99_ms=slo_p99_ms, cost=cost)
    write_analysis(folder, analysis.summary)
    path = out if out is not None else default_report_path(folder, lang)
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; pass a file path such as {path / 'report.html'}")
    return write_html(path, render_run_report(analysis, lang, read_precision(folder)))

"""Build RUN_DIR/report.html (and RUN_DIR/analysis/*) from a run folder alone."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.decomposition import COMPONENTS
from analysis.quality import Finding
from analysis.steps import OUTCOME_OK
from analysis.summary import RunAnalysis, analyse_folder, write_analysis
from embedperf.errors import ConfigError
from embedperf.schema import RunFolder
from reports.figures import run_figures
from reports.i18n import LANGS, t
from reports.render import num, render

TOP_ERRORS = 10


def _finding_text(lang: str) -> object:
    def text(finding: Finding) -> str:
        params = {k: (num(v, 1) if isinstance(v, float) else v) for k, v in finding.params.items()}
        return t(f"f_{finding.code}", lang, **params)

    return text


def top_errors(analysis: RunAnalysis) -> list[tuple[str, int]]:
    rows = analysis.prepared.rows
    failed = rows[(rows["outcome"].to_numpy() != OUTCOME_OK) & ~rows["probe"].to_numpy()]
    if not len(failed):
        return []
    labels = failed["error"].astype(object).where(failed["error"].notna(), None)
    codes = failed["status_code"].to_numpy()
    text = pd.Series(
        [f"{'' if np.isnan(c) else int(c)} {e or ''}".strip() for c, e in zip(codes, labels, strict=True)]
    )
    counts = text.value_counts().head(TOP_ERRORS)
    return [(str(k), int(v)) for k, v in counts.items()]


def read_precision(folder: RunFolder) -> dict[str, Any] | None:
    """The precision check stored beside the run, if one was made (embedperf precision --run / matrix)."""
    if not folder.precision.is_file():
        return None
    try:
        data = json.loads(folder.precision.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def render_run_report(analysis: RunAnalysis, lang: str, precision: dict[str, Any] | None = None) -> str:
    summary = analysis.summary
    labels = {s.stats.index: s.stats.label for s in summary.steps}
    duration_s = (
        summary.end_unix_s - summary.start_unix_s
        if summary.end_unix_s is not None and summary.start_unix_s is not None
        else None
    )
    return render(
        "report.html.j2",
        lang,
        summary=summary,
        info=summary.service_info or {},
        figures=run_figures(analysis, lang),
        components=COMPONENTS,
        duration_s=duration_s,
        step_label=lambda index: labels.get(index, str(index)),
        finding=_finding_text(lang),
        top_errors=top_errors(analysis),
        precision=precision,
    )


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ConfigError(f"unknown language {lang!r}; choose one of {', '.join(LANGS)}")
    return lang


def write_html(path: Path, html: str) -> None:
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)


def build_report(folder: RunFolder, lang: str = "en", slo_p99_ms: float | None = None) -> Path:
    """Write RUN_DIR/report.html and RUN_DIR/analysis/*; return the report path."""
    check_lang(lang)
    analysis = analyse_folder(folder, slo_p99_ms=slo_p99_ms)
    write_analysis(folder, analysis.summary)
    write_html(folder.report, render_run_report(analysis, lang, read_precision(folder)))
    return folder.report

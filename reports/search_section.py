"""The capacity-search section of a run report: every probe against its rate, the answer, telemetry there."""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from analysis.search import SearchRecord, devices_serving, headline, read_search
from analysis.summary import RunAnalysis
from analysis.telemetry import TelemetryStats
from reports.figures import figure_style, to_data_uri

VERDICT_COLOURS = {"pass": "#55a868", "fail": "#c44e52", "uncertain": "#dd8452"}


@dataclass(frozen=True)
class SearchSection:
    """What the template block shows."""

    record: SearchRecord
    headline: str
    devices: int
    figure: str
    telemetry: TelemetryStats | None  # over the confirming probe (else the probe at the answer)


def search_section(analysis: RunAnalysis, lang: str) -> SearchSection | None:
    """None for runs that were not a capacity search."""
    manifest = analysis.manifest
    record = read_search(manifest)
    if record is None:
        return None
    devices = devices_serving(manifest)
    at_answer = record.confirm_stage_index
    if at_answer is None and record.answer_rps is not None:
        passed = [p.stage_index for p in record.probes if p.rate == record.answer_rps and p.verdict == "pass"]
        at_answer = passed[-1] if passed else None
    telemetry = next((s.telemetry for s in analysis.summary.steps if s.stats.index == at_answer), None)
    return SearchSection(
        record=record,
        headline=headline(record, devices),
        devices=devices,
        figure=search_figure(record, lang),
        telemetry=telemetry,
    )


def search_figure(record: SearchRecord, lang: str) -> str:
    """P50 and P99 (with its interval) of every probe against its rate, coloured by verdict, answer marked."""
    with plt.rc_context(figure_style(lang)):
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        for verdict, colour in VERDICT_COLOURS.items():
            probes = [p for p in record.probes if p.verdict == verdict and p.p99_ms is not None]
            if not probes:
                continue
            rate = np.array([p.rate for p in probes])
            p99 = np.array([p.p99_ms for p in probes], dtype=float)
            lower = np.array([p.p99_lower_ms if p.p99_lower_ms is not None else np.nan for p in probes])
            upper = np.array([p.p99_upper_ms if p.p99_upper_ms is not None else np.nan for p in probes])
            ax.errorbar(
                rate,
                p99,
                yerr=[np.nan_to_num(p99 - lower), np.nan_to_num(upper - p99)],
                fmt="o",
                color=colour,
                capsize=3,
                label=f"P99 ({verdict})",
            )
            p50 = [p.p50_ms for p in probes]
            ax.scatter(rate, [np.nan if v is None else v for v in p50], marker="x", color=colour, s=18)
        for i, p in enumerate(record.probes):
            if p.p99_ms is not None:
                ax.annotate(str(i), (p.rate, p.p99_ms), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axhline(record.slo_p99_ms, color="k", linestyle="--", linewidth=1, label="SLO P99")
        if record.answer_rps is not None:
            ax.axvline(
                record.answer_rps, color="#4c72b0", linewidth=1.5, label=f"answer {record.answer_rps:g} req/s"
            )
        ax.set_yscale("log")
        ax.set_xlabel("offered rate (req/s); x = P50, numbers = probe order")
        ax.set_ylabel("latency from intended start (ms)")
        ax.set_title("Capacity search: every probe")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        return to_data_uri(fig)

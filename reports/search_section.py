"""The capacity-search section of a run report: every probe against its rate, the answer, telemetry there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.model.telemetry import TelemetryStats
from analysis.run.summary import RunAnalysis
from decisions.search.record import note_key
from decisions.search.state import SearchRecord, devices_serving, read_search
from reports.figures import finish, log_scale, new_figure, style
from reports.i18n import t

VERDICT_COLOURS = {"pass": "#55a868", "fail": "#c44e52", "uncertain": "#dd8452", "no_verdict": "#8c8c8c"}


@dataclass(frozen=True)
class ProbeText:
    """One probe's words in the report's language."""

    phase: str
    verdict: str
    reason: str


@dataclass(frozen=True)
class SearchSection:
    """What the template block shows (every text already in the report's language)."""

    record: SearchRecord
    headline: str
    measured: str  # the P99 at the answer with its interval, and how many probes
    status: str
    note: str
    verdict: str  # the SLO verdict line of the headline: agrees with the answer, whatever the probes did
    verdict_ok: bool  # an answer to --precision (exit 0)
    rule: str
    probes: list[ProbeText]
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
        headline=search_headline(record, devices, lang),
        measured=measured_text(record, lang),
        status=t(f"sst_{record.status}", lang),
        note=note_text(record, lang),
        verdict=verdict_text(record, lang),
        verdict_ok=record.outcome == "answer",
        rule=t(
            "search_rule", lang, confidence=f"{record.confidence:.0%}", p99=f"{record.slo_p99_ms:g}",
            budget=f"{record.error_budget_pct:g}", goodput=f"{1.0 - record.goodput_tolerance:.0%}",
            growth=f"{record.growth:g}", precision=f"{record.precision:.0%}",
            confirm=f"{record.confirm_factor:g}",
        ),  # fmt: skip
        probes=[
            ProbeText(
                phase=t(f"ph_{p.phase}", lang),
                verdict=t(f"sv_{p.verdict}", lang),
                reason=t(f"sr_{p.reason_code}", lang, **p.reason_params) if p.reason_code else p.reason,
            )
            for p in record.probes
        ],
        devices=devices,
        figure=search_figure(record, lang),
        telemetry=telemetry,
    )


def note_text(record: SearchRecord, lang: str) -> str:
    """Why the search stopped where it did ('' when it found its answer). A record written before a note
    gained parameters keeps its stored English note."""
    if record.status == "found" or not record.note:
        return ""
    if not record.note_params:
        return record.note
    try:
        return t(f"sn_{note_key(record.status, record.note_params)}", lang, **record.note_params)
    except (KeyError, IndexError, ValueError):
        return record.note


def measured_text(record: SearchRecord, lang: str) -> str:
    """The P99 measured at the answer, with its interval when the record has one."""
    p99 = f"{record.answer_p99_ms:.1f}" if record.answer_p99_ms is not None else "n/a"
    lower, upper = record.answer_p99_lower_ms, record.answer_p99_upper_ms
    if lower is None or upper is None:
        return t("search_measured", lang, p99=p99, probes=len(record.probes))
    interval = {"confidence": f"{record.confidence:.0%}", "lower": f"{lower:.1f}", "upper": f"{upper:.1f}"}
    return t("search_measured_interval", lang, p99=p99, probes=len(record.probes), **interval)


def verdict_text(record: SearchRecord, lang: str) -> str:
    """The headline's SLO verdict for a search: met up to the answer, or not met at any probed rate. A
    search's probes above the limit fail by design, so the per-step verdict ("met at some steps only") says
    nothing about the answer; this line says what the headline says."""
    status = t(f"sst_{record.status}", lang)
    if record.answer_rps is None:
        return t("search_verdict_none", lang, status=status)
    return t("search_verdict_met", lang, rps=f"{record.answer_rps:g}", status=status)


def search_headline(record: SearchRecord, devices: int, lang: str) -> str:
    """'N req/s per device at P99 <= X ms' in lang (decisions.search.state.headline is the console's)."""
    p99 = f"{record.slo_p99_ms:g}"
    if record.answer_rps is None:
        status = t(f"sst_{record.status}", lang)
        return t("search_no_answer", lang, p99=p99, status=status, note=note_text(record, lang))
    low, high = record.uncertainty_rps
    span = t("search_span", lang, low=f"{low:g}", high=f"{high:g}") if None not in (low, high) else ""
    per_device, rps = f"{record.answer_rps / max(devices, 1):.1f}", f"{record.answer_rps:g}"
    return t("search_answer", lang, per_device=per_device, p99=p99, rps=rps, n=devices, span=span)


def search_figure(record: SearchRecord, lang: str) -> str:
    """Every probe's P99 and its interval (error bars; an unbounded end runs to the plot's edge) against
    its rate, coloured by verdict, with P50, the SLO line, the final bracket shaded and the answer marked."""
    with style(lang):
        fig, ax = new_figure((6.5, 3.6))
        known = [p.p99_upper_ms or p.p99_ms for p in record.probes if p.p99_ms is not None]
        top_ms = max([*known, record.slo_p99_ms]) * 1.5  # where an unbounded upper end is drawn to
        bottom_ms = min([p.p99_lower_ms or p.p99_ms or top_ms for p in record.probes] + [record.slo_p99_ms])
        for verdict, colour in VERDICT_COLOURS.items():
            probes = [p for p in record.probes if p.verdict == verdict and p.p99_ms is not None]
            if not probes:
                continue
            rate = np.array([p.rate for p in probes])
            p99 = np.array([p.p99_ms for p in probes], dtype=float)
            lower = np.array([p.p99_lower_ms if p.p99_lower_ms is not None else bottom_ms for p in probes])
            upper = np.array([p.p99_upper_ms if p.p99_upper_ms is not None else top_ms for p in probes])
            yerr = [np.clip(p99 - lower, 0.0, None), np.clip(upper - p99, 0.0, None)]
            label = t("fs_p99", lang, verdict=t(f"sv_{verdict}", lang))
            ax.errorbar(rate, p99, yerr=yerr, fmt="o", color=colour, capsize=3, label=label)
            p50 = np.array([p.p50_ms for p in probes], dtype=float)  # None: NaN
            ax.scatter(rate, p50, marker="x", color=colour, s=18)
        low, high = record.uncertainty_rps
        if low is not None and high is not None:
            span = t("search_span", lang, low=f"{low:g}", high=f"{high:g}").lstrip("，, ")
            ax.axvspan(low, high, color="#4c72b0", alpha=0.12, label=span)
        for i, p in enumerate(record.probes):
            if p.p99_ms is not None:
                ax.annotate(str(i), (p.rate, p.p99_ms), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axhline(record.slo_p99_ms, color="k", linestyle="--", linewidth=1, label=t("fs_slo", lang))
        if record.answer_rps is not None:
            answer = t("fs_answer", lang, rps=f"{record.answer_rps:g}")
            ax.axvline(record.answer_rps, color="#4c72b0", linewidth=1.5, label=answer)
        log_scale(ax, "y")
        title = f"{t('fig_search', lang)} · {t('fs_interval', lang, confidence=f'{record.confidence:.0%}')}"
        return finish(fig, ax, title, t("fs_xlabel", lang), t("fs_ylabel", lang), 7)

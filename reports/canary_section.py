"""The canary section of a run report: the verdict, the stages side by side, a per-window timeline with the
triggers' thresholds drawn, and every window's figures."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.run.canary import CanaryAnalysis, SpanFigures, analyse_canary
from embedperf.canary_record import SIDES, WindowJudgement
from embedperf.schema import Manifest, RunFolder
from reports.figures import new_figure, style, to_data_uri
from reports.i18n import t

SIDE_COLOURS = {"baseline": "#4c72b0", "candidate": "#dd8452"}
STATUS_CLASS = {"promote": "pass", "rollback": "fail"}  # no verdict, incomplete and running: warn


@dataclass(frozen=True)
class CanarySection:
    """What the template block shows."""

    analysis: CanaryAnalysis
    status: str  # in the report's language
    status_class: str
    detail: str  # the record's line after its status word (the block shows the status once, translated)
    plan: str  # the stages and windows, in the report's language
    triggers: list[str]  # each enabled trigger with its threshold, in the report's language
    figure: str
    live: dict[tuple[int, int], WindowJudgement]  # what the triggers saw, per (stage, window)


def canary_section(folder: RunFolder, manifest: Manifest, lang: str) -> CanarySection | None:
    """None for a run that was no canary."""
    analysis = analyse_canary(folder, manifest)
    if analysis is None:
        return None
    record = analysis.record
    stages, window_s = ", ".join(f"{w:g}" for w in record.stages_pct), f"{record.window_s:g}"
    return CanarySection(
        analysis=analysis,
        status=t(f"cn_status_{record.status}", lang),
        status_class=STATUS_CLASS.get(record.status, "warn"),
        detail=line_detail(record.line, record.status),
        plan=t("cn_plan", lang, stages=stages, windows=record.windows_per_stage, window_s=window_s),
        triggers=trigger_texts(analysis, lang),
        figure=timeline_figure(analysis, lang),
        live={(w.stage_index, w.window_index): w for w in record.windows},
    )


def line_detail(line: str, status: str) -> str:
    """The verdict line without the English status word it opens with ("PROMOTE: 2 stages…" -> ": 2 stages…")."""
    word = t(f"cn_status_{status}", "en")
    return line[len(word) :] if line.startswith(word) else f": {line}" if line else ""


def trigger_texts(analysis: CanaryAnalysis, lang: str) -> list[str]:
    r, c = analysis.rollback, analysis.canary
    # (threshold, catalogue key, its placeholder, other params) of each trigger
    triggers: tuple[tuple[float | None, str, str, dict[str, int]], ...] = (
        (r.max_error_rate_pct, "error_rate", "x", {"n": c.min_window_requests}),
        (r.max_p99_ms, "p99_ms", "y", {"n": r.p99_windows}),
        (r.max_p99_increase_pct, "p99_increase", "z", {"n": r.p99_windows}),
        (r.min_agreement_cosine, "agreement", "c", {}), (r.max_temp_c, "temperature", "temp", {}),
        (r.max_unavailable_s, "unavailable", "s", {}),
    )
    return [t(f"cn_tr_{key}", lang, **{x: f"{v:g}"}, **more) for v, key, x, more in triggers if v is not None]


def _series(windows: list[SpanFigures], side: str, attr: str, scale: float = 1.0) -> np.ndarray:
    values = [getattr(getattr(w, side), attr) for w in windows]
    return np.array([np.nan if v is None else v * scale for v in values], dtype=float)


def timeline_figure(analysis: CanaryAnalysis, lang: str) -> str:
    """P99 and error rate per window for both sides; the P99 limit each window was judged against, the
    absolute limits, the stage boundaries and the window where a trigger fired."""
    windows = analysis.windows
    record, rollback = analysis.record, analysis.rollback
    with style(lang):
        fig, (ax_p99, ax_err) = new_figure((7.0, 5.0), 2, 1, sharex=True)
        if not windows:
            ax_p99.set_title(t("cn_no_windows", lang))
            return to_data_uri(fig)
        origin = windows[0].start_unix_s
        x = np.array([(w.start_unix_s + w.end_unix_s) / 2.0 - origin for w in windows])
        for side in SIDES:
            style_kw = {"color": SIDE_COLOURS[side], "label": t(f"cn_{side}", lang)}
            ax_p99.plot(x, _series(windows, side, "p99_ms"), "o-", **style_kw)
            ax_err.plot(x, _series(windows, side, "error_rate", 100.0), "o-", **style_kw)
        live = {(w.stage_index, w.window_index): w for w in record.windows}
        limits = [live.get((w.stage_index, w.window_index or 0)) for w in windows]
        limit_ms = np.array([None if j is None else j.p99_limit_ms for j in limits], dtype=float)  # None: NaN
        limit_style = {"color": "#c44e52", "linestyle": "--", "linewidth": 1}
        if np.isfinite(limit_ms).any():
            ax_p99.step(x, limit_ms, where="mid", label=t("cn_p99_limit", lang), **limit_style)
        if rollback.max_error_rate_pct is not None:
            ax_err.axhline(rollback.max_error_rate_pct, label=t("cn_error_limit", lang), **limit_style)
        for stage in analysis.stages[1:]:
            for ax in (ax_p99, ax_err):
                ax.axvline(stage.start_unix_s - origin, color="#8c8c8c", linewidth=0.8)
        for stage in analysis.stages:
            ax_p99.annotate(
                f"{stage.weight_pct:g}%", (stage.start_unix_s - origin, 1.0), fontsize=7,
                xycoords=("data", "axes fraction"), xytext=(2, -10), textcoords="offset points",
            )  # fmt: skip
        if record.status == "rollback" and record.stage_index is not None:
            where = (record.stage_index, record.window_index)
            for w in (w for w in windows if (w.stage_index, w.window_index) == where):
                for ax in (ax_p99, ax_err):
                    ax.axvspan(w.start_unix_s - origin, w.end_unix_s - origin, color="#c44e52", alpha=0.15)
        ax_p99.set_ylabel(t("cn_p99_ms", lang))
        ax_err.set_ylabel(t("cn_error_pct", lang))
        ax_err.set_xlabel(t("cn_seconds", lang))
        ax_p99.set_title(t("fig_canary", lang))
        for ax in (ax_p99, ax_err):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        return to_data_uri(fig)

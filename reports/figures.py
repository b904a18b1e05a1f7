"""Report figures (matplotlib Agg) as inline base64 PNG data URIs; time series are downsampled first."""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from analysis.engine.minute_series import MinutePoint
from analysis.model.decomposition import COMPONENTS
from analysis.run.summary import RunAnalysis, RunSummary
from reports.i18n import t

CJK_FONT_NAMES = ("WenQuanYi Zen Hei", "Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC")
CJK_FONT_FILES: tuple[str, ...] = ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",)
MAX_SERIES_POINTS = 1500
DPI = 90
TWIN_SPINE_OFFSET = 0.08  # third and later y axes of a panel, in axes widths
OWN_AXIS_IN = 0.8  # room on the right for each y axis of a panel after its first (tick labels, label)
# Offered load as in the throughput figure: dashed grey behind goodput.
MINUTE_LINE_STYLES: dict[str, dict[str, Any]] = {"qps": {"ls": "--", "color": "C7"}}
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
STEP_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


@lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """A CJK-capable font family known to matplotlib, registering the Debian one if present."""
    for path in CJK_FONT_FILES:
        if Path(path).is_file():
            with contextlib.suppress(OSError, RuntimeError):
                font_manager.fontManager.addfont(path)
    names = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONT_NAMES if name in names), None)


def figure_lang(lang: str) -> str:
    """Chinese figure labels only when a CJK font exists; otherwise English, silently."""
    return "zh" if lang == "zh" and cjk_font() is not None else "en"


def style(lang: str) -> Any:
    """The figures' rcParams for a `with` block (matplotlib.rc_context; pyplot is never imported)."""
    font = cjk_font() if lang == "zh" else None
    families = [font, "DejaVu Sans"] if font else ["DejaVu Sans"]
    return matplotlib.rc_context({
        "font.family": "sans-serif", "font.sans-serif": families, "axes.unicode_minus": False, "font.size": 9,
    })  # fmt: skip


class Margins(NamedTuple):
    """The space around and between a figure's axes, in inches. Fixed margins lay a figure out in its one
    draw; matplotlib's tight layout measures every tick label in a draw of its own first, a quarter of a
    report's build. They hold 7-character tick labels, the axis labels and the title (checked for every
    figure, in both languages, by tests/unit/reports/test_figure_margins.py)."""

    left_in: float = 0.8
    right_in: float = 0.2
    bottom_in: float = 0.5
    top_in: float = 0.3
    wspace_in: float = 0.85  # between columns: the right one's y tick labels and y label
    hspace_in: float = 0.22  # between rows, which share their x axis (no tick labels between them)


MARGINS = Margins()


def new_figure(
    figsize: tuple[float, float],
    nrows: int = 1,
    ncols: int = 1,
    *,
    sharex: bool = False,
    squeeze: bool = True,
    margins: Margins = MARGINS,
) -> tuple[Figure, Any]:
    """A figure and its axes (one Axes, or an array for several), inside fixed margins. The Figure is made
    directly, not through pyplot: no GUI state to close, and the report does not pay for importing pyplot."""
    if nrows > 1 and not sharex:
        raise ValueError(
            "stacked panels share their x axis: the margins leave no room for tick labels between"
        )
    width_in, height_in = figsize
    fig = Figure(figsize=figsize, dpi=DPI)
    axes_width_in = (width_in - margins.left_in - margins.right_in - margins.wspace_in * (ncols - 1)) / ncols
    rows_in = height_in - margins.bottom_in - margins.top_in - margins.hspace_in * (nrows - 1)
    axes_height_in = rows_in / nrows
    fig.subplots_adjust(
        left=margins.left_in / width_in,
        right=1.0 - margins.right_in / width_in,
        bottom=margins.bottom_in / height_in,
        top=1.0 - margins.top_in / height_in,
        wspace=margins.wspace_in / axes_width_in,
        hspace=margins.hspace_in / axes_height_in,
    )
    return fig, fig.subplots(nrows, ncols, sharex=sharex, squeeze=squeeze)


def log_scale(ax: Axes, which: Literal["x", "y"]) -> None:
    """Put one axis of `ax` on a log scale labelled in plain numbers (100, 1000), in the unit its label
    names. matplotlib's own log labels are powers of ten in mathtext, which it parses anew for every
    tick of every figure: a third of a log-axis figure's drawing time."""
    if which == "x":
        ax.set_xscale("log")
    else:
        ax.set_yscale("log")
    axis: Axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(LogFormatter())
    axis.set_minor_formatter(LogFormatter(labelOnlyBase=False))


def to_data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.savefig(buf, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def finish(
    fig: Figure, ax: Axes, title: str, xlabel: str | None, ylabel: str, legend_size: int = 8, **grid: Any
) -> str:
    """A one-panel figure's title, axis labels, grid and legend, then the figure as a data URI."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, **grid)
    ax.legend(fontsize=legend_size)
    return to_data_uri(fig)


def _loads(summary: RunSummary) -> tuple[np.ndarray, str]:
    x = np.array([s.stats.load for s in summary.steps], dtype=float)
    return x, ("rate" if summary.open_loop else "users")


def percentiles_vs_load(summary: RunSummary, lang: str) -> str:
    fig, ax = new_figure((6.5, 3.6))
    x, xkey = _loads(summary)
    for name, label in (("p50", "P50"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99"), ("p999", "P99.9")):
        y = np.array([getattr(s.stats.latency, f"{name}_ms") for s in summary.steps], dtype=float)
        ax.plot(x, y, marker="o", label=label)
    ci = np.array([s.stats.p99_ci_ms for s in summary.steps], dtype=float)
    if len(ci):
        ax.fill_between(x, ci[:, 0], ci[:, 1], alpha=0.2, color="C3")
    if summary.slo_p99_ms is not None:
        ax.axhline(summary.slo_p99_ms, color="k", linestyle="--", linewidth=1, label=t("slo_label", lang))
    return finish(fig, ax, t("fig_percentiles", lang), t(xkey, lang), t("latency_ms", lang))


def throughput_vs_load(summary: RunSummary, lang: str) -> str:
    fig, ax = new_figure((6.5, 3.6))
    x, xkey = _loads(summary)
    qps = np.array([s.stats.qps for s in summary.steps])
    ax.plot(x, qps, marker="o", color="C0", label=t("goodput", lang))
    offered = [getattr(s.stats, "offered_qps", None) for s in summary.steps]
    if any(v is not None and v > 0 for v in offered):
        ax.plot(x, np.array(offered, dtype=float), ls="--", color="C7", label=t("offered", lang))
    for xi, step in zip(x, summary.steps, strict=True):
        if step.stats.index == summary.capacity.knee_index:
            ax.plot([xi], [step.stats.qps], marker="*", ms=16, color="C3", label=t("knee_label", lang))
    return finish(fig, ax, t("fig_throughput", lang), t(xkey, lang), t("qps", lang))


def _request_series(analysis: RunAnalysis) -> pd.DataFrame:
    """Goodput and ok-latency P50/P99 per time bucket (seconds from the run start), out of core."""
    series = analysis.figures.request_series
    if series is None:
        return pd.DataFrame({"qps": [], "p50": [], "p99": []})
    p50, p99 = (np.array(ms, dtype=np.float64) for ms in (series.p50_ms, series.p99_ms))  # None: NaN
    index = pd.Index(series.t_s, dtype=np.float64)
    return pd.DataFrame({"qps": series.qps, "p50": p50, "p99": p99}, index=index)


def time_series(analysis: RunAnalysis, lang: str) -> str:
    summary = analysis.summary
    t0 = summary.start_unix_s or 0.0
    req = _request_series(analysis)
    tel = analysis.telemetry.per_second_series(MAX_SERIES_POINTS)
    panels: list[tuple[str, list[tuple[pd.Series, str]]]] = [
        (t("qps", lang), [(req["qps"], "QPS")]),
        (t("latency_ms", lang), [(req["p50"], "P50"), (req["p99"], "P99")]),
    ]
    for metric, key in (
        ("device_util_pct", "ax_device_util"), ("mem_bw_util_pct", "ax_mem_bw"), ("temp_c", "ax_temp"),
        ("power_w", "ax_power"), ("queue_depth", "ax_queue"),
    ):  # fmt: skip
        if metric in tel:
            series = tel[metric].dropna()
            series.index = series.index - np.floor(t0)
            panels.append((t(key, lang), [(series, t(key, lang))]))
    fig, axes = new_figure((10, 1.6 * len(panels) + 0.6), len(panels), 1, sharex=True)
    axes = np.atleast_1d(axes)
    for ax, (ylabel, lines) in zip(axes, panels, strict=True):
        for i, s in enumerate(step.stats for step in summary.steps):
            span = (s.steady_start_unix_s - t0, s.steady_end_unix_s - t0)
            ax.axvspan(*span, color=STEP_COLOURS[i % 8], alpha=0.08)
        for series, label in lines:
            ax.plot(series.index.to_numpy(), series.to_numpy(), linewidth=0.9, label=label)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend(fontsize=7, loc="upper left")
    axes[0].set_title(t("fig_timeseries", lang))
    axes[-1].set_xlabel(t("ax_time_s", lang))
    return to_data_uri(fig)


def latency_cdf(analysis: RunAnalysis, lang: str) -> str | None:
    """One latency CDF per step; None when no step has an ok answer to draw."""
    cdf_ms = analysis.figures.cdf_ms
    if not any(cdf_ms.get(s.stats.index) for s in analysis.summary.steps):
        return None
    fig, ax = new_figure((6.5, 3.6))
    for i, step in enumerate(analysis.summary.steps):
        if quantiles := cdf_ms.get(step.stats.index):
            y = np.linspace(0.0, 1.0, len(quantiles))
            ax.plot(quantiles, y, color=STEP_COLOURS[i % 8], label=step.stats.label)
    log_scale(ax, "x")
    return finish(fig, ax, t("fig_cdf", lang), t("latency_ms", lang), t("ax_cdf", lang), which="both")


def batch_distribution(analysis: RunAnalysis, lang: str) -> str | None:
    batch_sizes = analysis.figures.batch_sizes
    if not any(batch_sizes.get(s.stats.index) for s in analysis.summary.steps):
        return None
    fig, ax = new_figure((6.5, 3.6))
    width = 0.8 / len(analysis.summary.steps)
    for i, step in enumerate(analysis.summary.steps):
        if counts := batch_sizes.get(step.stats.index):
            sizes = np.array(sorted(counts), dtype=np.float64)
            n = np.array([counts[int(size)] for size in sizes], dtype=np.float64)
            ax.bar(sizes + i * width, n / n.sum(), width, color=STEP_COLOURS[i % 8], label=step.stats.label)
    return finish(fig, ax, t("fig_batch", lang), t("ax_batch", lang), t("ax_share", lang), axis="y")


def decomposition_bars(summary: RunSummary, lang: str) -> str | None:
    steps = [s for s in summary.steps if s.decomposition is not None]
    if not steps:
        return None
    fig, ax = new_figure((6.5, 3.6))
    labels = [s.stats.label for s in steps]
    bottom = np.zeros(len(steps))
    for j, name in enumerate(COMPONENTS):
        values = np.array([s.decomposition.parts_ms[name] for s in steps if s.decomposition is not None])
        ax.bar(labels, values, bottom=bottom, label=t(name, lang), color=f"C{j}")
        bottom += values
    return finish(fig, ax, t("fig_decomposition", lang), None, t("latency_ms", lang), 7, axis="y")


class MinutePanel(NamedTuple):
    """One panel of the per-minute figure: its lines (column, label) and the y label they share. ylabel None
    puts each line on its own y axis (temperature, power and clock have different units)."""

    lines: list[tuple[str, str]]
    ylabel: str | None


def minute_frame(minutes: list[MinutePoint]) -> pd.DataFrame:
    """The per-minute points on a gap-free minute index: a minute without requests is NaN, never bridged."""
    frame = pd.DataFrame([p.model_dump() for p in minutes]).set_index("minute").astype(np.float64)
    frame["error_pct"] = frame["error_rate"] * 100.0
    return frame.reindex(pd.RangeIndex(int(frame.index.min()), int(frame.index.max()) + 1))


def minute_panels(frame: pd.DataFrame, lang: str) -> list[MinutePanel]:
    """The panels of the per-minute figure, top to bottom; a line without any value, and a panel without
    any line, are left out."""
    def one_line(column: str, key: str) -> MinutePanel:
        return MinutePanel([(column, t(key, lang))], t(key, lang))

    own_axes = (("temp_max_c", "ax_temp"), ("power_w", "ax_power"), ("clock_mhz", "ax_clock"))
    per_s = t("ax_req_per_s", lang)
    candidates = [
        MinutePanel([("goodput_qps", t("goodput", lang)), ("qps", t("offered", lang))], per_s),
        MinutePanel([("p50_ms", "P50"), ("p99_ms", "P99")], t("latency_ms", lang)),
        one_line("error_pct", "error_rate_pct"),
        one_line("device_util_pct", "ax_serving_util"),
        MinutePanel([(column, t(key, lang)) for column, key in own_axes], None),
        one_line("service_rss_mb", "ax_service_rss"),
    ]
    drawn = ([(c, name) for c, name in p.lines if c in frame and frame[c].notna().any()] for p in candidates)
    return [MinutePanel(lines, p.ylabel) for p, lines in zip(candidates, drawn, strict=True) if lines]


def _own_axes(ax: Any, x: np.ndarray, frame: pd.DataFrame, lines: list[tuple[str, str]]) -> None:
    """Each line on its own y axis: the first on the left, the others on right spines set apart."""
    for i, (column, label) in enumerate(lines):
        target = ax if i == 0 else ax.twinx()
        if i > 1:
            target.spines["right"].set_position(("axes", 1.0 + TWIN_SPINE_OFFSET * (i - 1)))
        colour = f"C{i + 3}"
        target.plot(x, frame[column].to_numpy(), color=colour, linewidth=0.9)
        target.set_ylabel(label, color=colour, fontsize=8)
        target.tick_params(axis="y", colors=colour)
        target.ticklabel_format(axis="y", style="plain", useOffset=False)


def soak_figure(analysis: RunAnalysis, lang: str) -> str | None:
    """Per-minute series of a long run (analysis.engine.minute_series), stacked panels sharing the minute axis."""
    if not analysis.figures.minutes:
        return None
    frame = minute_frame(analysis.figures.minutes)
    panels = minute_panels(frame, lang)
    x = frame.index.to_numpy()
    own_axes = max((len(p.lines) for p in panels if p.ylabel is None), default=1)
    right_in = MARGINS.right_in + OWN_AXIS_IN * (own_axes - 1)
    size = (10, 1.5 * len(panels) + 0.6)
    fig, axes = new_figure(size, len(panels), 1, sharex=True, margins=Margins(right_in=right_in))
    axes = np.atleast_1d(axes)
    for ax, panel in zip(axes, panels, strict=True):
        if panel.ylabel is None:
            _own_axes(ax, x, frame, panel.lines)
        else:
            for column, label in panel.lines:
                style_kw = MINUTE_LINE_STYLES.get(column, {})
                ax.plot(x, frame[column].to_numpy(), linewidth=0.9, label=label, **style_kw)
            ax.set_ylabel(panel.ylabel, fontsize=8)
            ax.ticklabel_format(axis="y", style="plain", useOffset=False)
            if len(panel.lines) > 1:
                ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    axes[0].set_title(t("fig_soak", lang))
    axes[-1].set_xlabel(t("ax_minute", lang))
    return to_data_uri(fig)


def run_figures(analysis: RunAnalysis, lang: str) -> dict[str, str]:
    """Every figure of the run report, keyed by name; absent keys had no data."""
    flang = figure_lang(lang)
    summary = analysis.summary
    out: dict[str, str | None] = {}
    with style(flang):
        if summary.steps:
            out["percentiles"] = percentiles_vs_load(summary, flang)
            out["throughput"] = throughput_vs_load(summary, flang)
            out["cdf"] = latency_cdf(analysis, flang)
            out["batch"] = batch_distribution(analysis, flang)
            out["decomposition"] = decomposition_bars(summary, flang)
        if analysis.figures.request_series is not None and analysis.figures.request_series.t_s:
            out["timeseries"] = time_series(analysis, flang)
        out["soak"] = soak_figure(analysis, flang)
    return {k: v for k, v in out.items() if v is not None}

"""`embedperf history`'s page: the headline trends of one series in one self-contained HTML file, and its JSON."""

from __future__ import annotations

from pathlib import Path

from embedperf.files import write_atomically
from reports.build import check_lang, write_html
from reports.figures import figure_lang, new_figure, style, to_data_uri
from reports.i18n import t
from reports.render import render
from study.history.trend import History

HISTORY_REPORT = "history.html"


def _errors(values: list[float], cis: list[tuple[float | None, float | None]]) -> list[list[float]]:
    """Error bar lengths below and above each point (0 where an end is unknown)."""
    low = [v - lo if lo is not None else 0.0 for v, (lo, _) in zip(values, cis, strict=True)]
    high = [hi - v if hi is not None else 0.0 for v, (_, hi) in zip(values, cis, strict=True)]
    return [[max(x, 0.0) for x in low], [max(x, 0.0) for x in high]]


def trend_figure(result: History, lang: str) -> str:
    """Goodput and P99 per run, oldest first, each with its 95% interval; the newest flagged in red."""
    lang = figure_lang(lang)
    points = result.points
    flagged = {f.metric for f in result.flags}
    flag_label = t("history_flagged", lang)
    xs = list(range(len(points)))
    names = [f"{p.commit or '?'}{'*' if p.dirty else ''}\n{p.label}" for p in points]
    with style(lang):
        fig, axes = new_figure((10.0, 6.0), nrows=2, sharex=True)
        for ax, metric, unit in ((axes[0], "qps", "req/s"), (axes[1], "p99_ms", "ms")):
            values = [getattr(p, metric) or 0.0 for p in points]
            cis = [p.qps_ci if metric == "qps" else p.p99_ci_ms for p in points]
            ax.errorbar(xs, values, yerr=_errors(values, cis), fmt="o-", color="#1f6feb", capsize=3)
            if points and metric in flagged:
                ax.plot([xs[-1]], [values[-1]], "o", color="#cf222e", markersize=10, label=flag_label)
                ax.legend(fontsize=8)
            ax.set_ylabel(f"{t('m_' + metric, lang)}")
            ax.set_title(f"{t('m_' + metric, lang)} ({unit})", fontsize=9)
            ax.grid(alpha=0.3)
        axes[1].set_xticks(xs)
        axes[1].set_xticklabels(names, fontsize=7)
        return to_data_uri(fig)


def write_history(
    result: History, out_dir: Path, lang: str = "en", html_path: Path | None = None
) -> tuple[Path, Path]:
    check_lang(lang)
    html_path = html_path or out_dir / HISTORY_REPORT
    json_path = html_path.with_suffix(".json")
    write_atomically(json_path, result.model_dump_json(indent=2))
    html = render(
        "history.html.j2", lang, h=result, figure=trend_figure(result, lang) if result.points else None
    )
    write_html(html_path, html)
    return html_path, json_path

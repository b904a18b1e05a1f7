"""The sweep's page: heatmaps of embeddings/s and P99 over inputs per request x users (one pair per text
length), the best cell under the SLO boxed, and the table; summary.json beside it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from reports.build import check_lang, write_html
from reports.figures import figure_lang, new_figure, style, to_data_uri
from reports.i18n import t
from reports.render import render
from study.sweep.grid import SweepTable, sweep_table
from study.sweep.spec import SweepRecord

SWEEP_REPORT = "sweep.html"
SUMMARY_FILE = "summary.json"


def _panel(ax: Axes, table: SweepTable, tokens: int | None, metric: str, title: str) -> None:
    grid = np.full((len(table.inputs), len(table.users)), math.nan)
    for i, n in enumerate(table.inputs):
        for j, u in enumerate(table.users):
            cell = table.cell(tokens, n, u)
            value = getattr(cell, metric) if cell is not None else None
            if value is not None:
                grid[i, j] = value
    cmap = "viridis" if metric == "embeddings_per_s" else "magma_r"
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto", origin="lower")
    for i in range(len(table.inputs)):
        for j in range(len(table.users)):
            if not math.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=8, color="white",
                        bbox={"facecolor": "black", "alpha": 0.35, "pad": 1, "linewidth": 0})  # fmt: skip
    best = table.best
    if best is not None and best.tokens == tokens:
        i, j = table.inputs.index(best.inputs), table.users.index(best.users)
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#cf222e", linewidth=3))
    ax.set_xticks(range(len(table.users)), [str(u) for u in table.users])
    ax.set_yticks(range(len(table.inputs)), [str(n) for n in table.inputs])
    ax.set_title(title, fontsize=9)


def heatmaps(table: SweepTable, lang: str) -> list[str]:
    """One figure per text length: embeddings/s beside P99, the best cell boxed in red."""
    lang = figure_lang(lang)
    out = []
    for tokens in table.tokens:
        suffix = f" · {t('sweep_tokens', lang)} {tokens}" if tokens is not None else ""
        with style(lang):
            fig, axes = new_figure((10.0, 4.2), ncols=2)
            _panel(axes[0], table, tokens, "embeddings_per_s", t("embeddings_per_s", lang) + suffix)
            _panel(axes[1], table, tokens, "p99_ms", "P99 (ms)" + suffix)
            for ax in axes:
                ax.set_xlabel(t("sweep_users", lang))
            axes[0].set_ylabel(t("sweep_inputs", lang))
            out.append(to_data_uri(fig))
    return out


def build_sweep_report(folder: Path, lang: str = "en") -> Path:
    """sweep.html and summary.json from the sweep folder alone (sweep.json and its run folders)."""
    check_lang(lang)
    record = SweepRecord.read(folder)
    table = sweep_table(folder, record)
    (folder / SUMMARY_FILE).write_text(table.model_dump_json(indent=2), encoding="utf-8")
    figures = heatmaps(table, lang) if table.cells else []
    html = render("sweep.html.j2", lang, table=table, record=record, figures=figures)
    return write_html(folder / (SWEEP_REPORT if lang == "en" else f"sweep.{lang}.html"), html)

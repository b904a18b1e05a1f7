"""The sweep's cells and page: each cell from its run folder (one adaptive step: embeddings/s of ok requests
in the steady window, the step's P99), the best cell (the most embeddings/s among those meeting the SLO and
budget), and heatmaps of embeddings/s and P99 over inputs per request x users, one pair per text length."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle
from pydantic import BaseModel

from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.schema import RunFolder
from reports.build import check_lang, write_html
from reports.figures import figure_lang, new_figure, style, to_data_uri
from reports.i18n import t
from reports.render import render
from study.sweep.spec import SweepRecord

SWEEP_REPORT = "sweep.html"
SUMMARY_FILE = "summary.json"


class Cell(BaseModel):
    inputs: int
    users: int
    tokens: int | None
    embeddings_per_s: float
    goodput_qps: float
    p99_ms: float | None
    p99_ci_ms: tuple[float | None, float | None]
    error_rate: float | None
    meets_slo: bool
    ended: str  # converged | max_time | fixed
    duration_s: float
    run_id: str


class SweepTable(BaseModel):
    """summary.json of a sweep: every cell, the SLO it was judged by and the best cell under it."""

    slo_p99_ms: float | None
    error_budget: float | None
    inputs: list[int]
    users: list[int]
    tokens: list[int | None]
    cells: list[Cell]
    best: Cell | None
    missing: list[str]  # request shapes whose run left no folder

    def cell(self, tokens: int | None, inputs: int, users: int) -> Cell | None:
        return next((c for c in self.cells if (c.tokens, c.inputs, c.users) == (tokens, inputs, users)), None)


def cells_of(analysis: RunAnalysis, inputs: int, tokens: int | None) -> list[Cell]:
    out = []
    for step in analysis.summary.steps:
        s = step.stats
        if s.users is None or s.duration_s <= 0:
            continue
        embeddings = analysis.figures.embeddings.get(s.index, float(s.n_ok))
        out.append(
            Cell(
                inputs=inputs, users=s.users, tokens=tokens, embeddings_per_s=embeddings / s.duration_s,
                goodput_qps=s.goodput_qps, p99_ms=s.latency.p99_ms, p99_ci_ms=s.p99_ci_ms,
                error_rate=s.error_rate, meets_slo=step.meets_slo,
                ended=step.ending.reason if step.ending else "fixed", duration_s=s.duration_s,
                run_id=analysis.summary.run_id,
            )
        )  # fmt: skip
    return out


def sweep_table(folder: Path, record: SweepRecord) -> SweepTable:
    cells, missing = [], []
    slo: tuple[float | None, float | None] = (record.spec.slo_p99_ms, None)
    for run in record.runs:
        if run.run_dir is None or not (folder / run.run_dir / "manifest.json").is_file():
            missing.append(
                f"n{run.inputs}" + (f"-t{run.tokens}" if run.tokens else "") + f" (exit {run.exit_code})"
            )
            continue
        analysis = analyse_folder(RunFolder(folder / run.run_dir), slo_p99_ms=record.spec.slo_p99_ms)
        slo = (analysis.summary.slo_p99_ms, analysis.summary.error_budget)
        cells += cells_of(analysis, run.inputs, run.tokens)
    meeting = [c for c in cells if c.meets_slo]
    return SweepTable(
        slo_p99_ms=slo[0],
        error_budget=slo[1],
        inputs=record.spec.inputs,
        users=record.spec.users,
        tokens=list(record.spec.tokens) or [None],
        cells=cells,
        best=max(meeting, key=lambda c: c.embeddings_per_s) if meeting else None,
        missing=missing,
    )


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

"""The sweep's cells from its run folders (one adaptive step each: embeddings/s of ok requests in the steady
window, the step's P99) and the best cell: the most embeddings/s among those meeting the SLO and budget.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.schema import RunFolder
from study.sweep.spec import SweepRecord


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

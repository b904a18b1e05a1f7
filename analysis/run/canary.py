"""A canary run's figures per window and per stage, each side beside the other, from every raw row (DuckDB).

The live monitor judged each window from the rows on disk at the time (canary.json keeps what it saw
and the verdict it acted on); this recomputes the same windows from the final requests.parquet for
the report: goodput, exact P50/P95/P99 (analysis.engine.order_stats, equal to numpy's) with a bootstrap
interval for P99, error rate and kinds, availability seconds, and the agreement of the answers.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
from pydantic import BaseModel, Field

from analysis.engine.availability import window_unavailable_s
from analysis.engine.order_stats import bootstrap_percentile_ci, exact_percentiles
from analysis.engine.requests import disc_order_stats, errors_by_kind
from analysis.engine.views import connect, create_views, request_files
from analysis.figures.bootstrap import DEFAULT_N_BOOT
from decisions.canary_verdict import stage_windows
from embedperf.canary_record import SIDES, CanaryRecord, read_canary_record
from embedperf.schema import Manifest, RunFolder
from scenarios.canary_models import Canary, Rollback

PERCENTILES_PCT: tuple[float, float, float] = (50.0, 95.0, 99.0)


class SideFigures(BaseModel):
    """One side over one window or stage (requests by send time, ok latencies)."""

    requests: int = 0
    ok: int = 0
    error_rate: float | None = Field(None, description="Failed / requests (a fraction).")
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    goodput_rps: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    p99_ci_ms: tuple[float | None, float | None] = (None, None)
    unavailable_s: int = 0


class SpanFigures(BaseModel):
    """A window (window_index set) or a whole stage (window_index None), both sides and their agreement."""

    stage_index: int
    window_index: int | None = None
    weight_pct: float
    start_unix_s: float
    end_unix_s: float
    baseline: SideFigures
    candidate: SideFigures
    agreement_n: int = Field(default=0, description="Texts sent to both sides whose answers were compared.")
    agreement_mean: float | None = Field(default=None, description="Mean cosine of the two sides' answers.")
    agreement_min: float | None = None


class CanaryAnalysis(BaseModel):
    """Everything the report's canary section shows."""

    record: CanaryRecord
    canary: Canary
    rollback: Rollback
    windows: list[SpanFigures]
    stages: list[SpanFigures]


def _side(
    con: duckdb.DuckDBPyConnection, side: str, stage: int, start: float, end: float, seed: int, n_boot: int
) -> SideFigures:
    where = "NOT probe AND side = ? AND stage = ? AND t_sent_unix_s >= ? AND t_sent_unix_s < ?"
    params = [side, stage, start, end]
    ok = "outcome = 0 AND isfinite(latency_ms)"
    counts = f"SELECT count(*), count(*) FILTER ({ok}) FROM tagged WHERE {where}"
    [(requests, n_ok)] = con.execute(counts, params).fetchall()
    pcts: list[float | None] = [None, None, None]
    ci: tuple[float | None, float | None] = (None, None)
    if n_ok:
        ok_rows = f"tagged WHERE {where} AND {ok}"
        order = disc_order_stats(con, "latency_ms", ok_rows, params, n_ok)
        pcts = list(exact_percentiles(n_ok, list(PERCENTILES_PCT), order))
        ci = bootstrap_percentile_ci(n_ok, 99.0, order, n_boot, seed)
    return SideFigures(
        requests=requests, ok=n_ok, error_rate=(requests - n_ok) / requests if requests else None,
        errors_by_kind=errors_by_kind(con, f"tagged WHERE {where}", params),
        goodput_rps=n_ok / (end - start) if end > start else 0.0, p50_ms=pcts[0], p95_ms=pcts[1],
        p99_ms=pcts[2], p99_ci_ms=ci, unavailable_s=window_unavailable_s(con, start, end, side=side),
    )  # fmt: skip


def _span(
    con: duckdb.DuckDBPyConnection, stage: int, window: int | None, weight_pct: float, start: float,
    end: float, n_boot: int,
) -> SpanFigures:  # fmt: skip
    seed = stage * 1000 + (window if window is not None else 999)
    sides = {side: _side(con, side, stage, start, end, seed, n_boot) for side in SIDES}
    [(n, mean, low)] = con.execute(
        "SELECT count(agreement_cosine), avg(agreement_cosine), min(agreement_cosine) FROM tagged "
        "WHERE NOT probe AND stage = ? AND t_sent_unix_s >= ? AND t_sent_unix_s < ? AND isfinite(agreement_cosine)",
        [stage, start, end],
    ).fetchall()
    return SpanFigures(
        stage_index=stage, window_index=window, weight_pct=weight_pct, start_unix_s=start, end_unix_s=end,
        baseline=sides["baseline"], candidate=sides["candidate"], agreement_n=int(n),
        agreement_mean=float(mean) if mean is not None else None,
        agreement_min=float(low) if low is not None else None,
    )  # fmt: skip


def analyse_canary(
    folder: RunFolder, manifest: Manifest, n_boot: int = DEFAULT_N_BOOT, work_dir: Path | None = None
) -> CanaryAnalysis | None:
    """None for a run that was no canary (no canary.json)."""
    record = read_canary_record(folder.root)
    if record is None:
        return None
    canary, rollback = manifest.scenario.canary, manifest.scenario.rollback
    stages = sorted(manifest.stages, key=lambda s: s.start_unix_s)
    windows: list[SpanFigures] = []
    per_stage = []
    with tempfile.TemporaryDirectory(prefix="canary-", dir=work_dir) as tmp, connect(Path(tmp)) as con:
        create_views(con, request_files(folder, Path(tmp)), stages)
        for stage in stages:
            weight = canary.stages_pct[min(stage.index, len(canary.stages_pct) - 1)]
            spans = stage_windows(stage, canary)
            windows += [_span(con, stage.index, k, weight, start, end, n_boot) for k, start, end in spans]
            if spans:
                stage_span = _span(con, stage.index, None, weight, spans[0][1], spans[-1][2], n_boot)
                for side in SIDES:  # a stage's unavailable seconds are its windows'
                    own = [getattr(w, side).unavailable_s for w in windows if w.stage_index == stage.index]
                    getattr(stage_span, side).unavailable_s = sum(own)
                per_stage.append(stage_span)
    return CanaryAnalysis(record=record, canary=canary, rollback=rollback, windows=windows, stages=per_stage)

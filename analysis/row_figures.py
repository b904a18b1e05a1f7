"""What the run summary takes from the request rows, and the in-memory reference that computes it.

The report reads these figures out of core (analysis/ooc_run.py, DuckDB over the Parquet files);
`row_figures` computes the same from rows loaded with pandas and is kept as the reference the
equality tests compare the out-of-core engine against (tests/unit/analysis/test_analysis_ooc_summary.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from analysis.bootstrap import DEFAULT_N_BOOT
from analysis.decomposition import Decomposition, decompose
from analysis.load import RunData
from analysis.outage import OutageWindow, outage_windows
from analysis.slowest import SlowRequest, slowest_requests
from analysis.soak import SoakInputs, soak_inputs
from analysis.steps import (
    OUTCOME_OK,
    StepStats,
    classify_outcomes,
    errors_by_kind,
    prepare_requests,
    probe_mask,
    step_stats,
)


class RequestTotals(BaseModel):
    """Every request of the run (warm-up included, validation probes excluded), by outcome."""

    n_requests: int = 0
    n_ok: int = 0
    n_failed: int = 0
    error_rate: float | None = None
    errors_by_kind: dict[str, int] = {}

    @property
    def most_common_error(self) -> str | None:
        return next(iter(self.errors_by_kind), None)

    @classmethod
    def of(cls, n_requests: int, n_ok: int, errors: dict[str, int]) -> RequestTotals:
        n_failed = n_requests - n_ok
        return cls(
            n_requests=n_requests,
            n_ok=n_ok,
            n_failed=n_failed,
            error_rate=n_failed / n_requests if n_requests else None,
            errors_by_kind=errors,
        )


@dataclass
class RowFigures:
    """Per-step statistics and run-wide figures from the request rows; nothing here holds a row."""

    stats: list[StepStats]
    decomposition: dict[int, Decomposition | None]
    dropped: dict[str, int]
    warmup_trimmed: dict[int, int]
    totals: RequestTotals
    outage_windows: list[OutageWindow]
    t_done_max_unix_s: float | None
    soak: SoakInputs | None
    slowest: list[SlowRequest]  # the slowest ok requests of the steady state, with their IDs


def request_totals(data: RunData) -> RequestTotals:
    requests = data.requests
    if not len(requests):
        return RequestTotals()
    counted = requests[~probe_mask(requests)]
    ok = classify_outcomes(counted) == OUTCOME_OK
    return RequestTotals.of(len(counted), int(ok.sum()), errors_by_kind(counted[~ok]))


def row_figures(data: RunData, open_loop: bool, n_boot: int = DEFAULT_N_BOOT) -> RowFigures:
    """The reference: every figure from the rows in memory (small runs and the equality tests)."""
    manifest = data.manifest
    prepared = prepare_requests(data.requests, manifest.stages)
    tolerance_ms = manifest.scenario.open_loop.lateness_tolerance_ms
    stages = sorted(manifest.stages, key=lambda s: s.index)
    fallback_model = manifest.service_info.fallback_model if manifest.service_info else None
    stats = [
        step_stats(
            prepared, stage, open_loop, n_boot=n_boot, lateness_tolerance_ms=tolerance_ms,
            fallback_model=fallback_model,
        )
        for stage in stages
    ]  # fmt: skip
    decomposition: dict[int, Decomposition | None] = {}
    for stage in stages:
        rows = prepared.rows.iloc[prepared.slices[stage.index]]
        ok_rows = rows[(rows["outcome"].to_numpy() == OUTCOME_OK) & ~rows["probe"].to_numpy()]
        decomposition[stage.index] = decompose(ok_rows)
    done = data.requests["t_done_unix_s"].to_numpy() if len(data.requests) else np.array([])
    steady = prepared.rows[~prepared.rows["probe"].to_numpy()]
    return RowFigures(
        stats=stats,
        decomposition=decomposition,
        dropped=prepared.dropped,
        warmup_trimmed=prepared.warmup_trimmed,
        totals=request_totals(data),
        outage_windows=outage_windows(data.requests),
        t_done_max_unix_s=float(np.nanmax(done)) if np.isfinite(done).any() else None,
        soak=soak_inputs(steady) if len(steady) else None,
        slowest=slowest_requests(prepared.rows),
    )

"""The summary's row figures computed in memory: the reference for analysis/run/analyse.py."""

from __future__ import annotations

import numpy as np

from analysis.figures.bootstrap import DEFAULT_N_BOOT
from analysis.model.decomposition import Decomposition
from analysis.model.row_figures import RequestTotals, RowFigures
from analysis.model.steps import OUTCOME_OK
from tests.oracles.in_memory.figures import decompose, outage_windows, slowest_requests, soak_inputs
from tests.oracles.in_memory.load import RunData
from tests.oracles.in_memory.steps import (
    classify_outcomes,
    errors_by_kind,
    prepare_requests,
    probe_mask,
    step_stats,
)


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

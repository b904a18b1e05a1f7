"""Per-step statistics from request rows held in pandas: the reference the DuckDB engine (analysis/engine) is checked against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.figures.bootstrap import DEFAULT_N_BOOT, interval, resampled_percentiles, rng_for
from analysis.model.served_models import ordered, served_fields
from analysis.model.steps import (
    MIN_SAMPLES_P99,
    MIN_SAMPLES_P999,
    OUTCOME_ERROR,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    PERCENTILE_METHOD,
    PERCENTILES_PCT,
    TIMEOUT_STATUS_CODES,
    VALIDATION_ENDPOINT_PREFIX,
    LatencyStats,
    OpenLoopStats,
    ServerStats,
    StepStats,
)
from decisions.search.stats import batch_sizes, dependence_factor
from embedperf.availability import bin_count, spanned_bins, unavailable_seconds
from embedperf.error_kinds import error_kind
from embedperf.schema import StageRecord
from scenarios.models import OpenLoop


@dataclass
class PreparedRequests:
    """Steady-state rows sorted by stage, with the counts of what was trimmed or dropped."""

    rows: pd.DataFrame
    slices: dict[int, slice]
    windows: dict[int, tuple[float, float]]
    warmup_trimmed: dict[int, int]
    dropped: dict[str, int] = field(default_factory=dict)
    ended: pd.DataFrame | None = None  # every row's send, end and outcome (availability counts them all)


def send_order_dependence(ok_rows: pd.DataFrame, p99_ms: float | None) -> float:
    """The dependence factor at the P99 of the ok latencies in send order (ties by latency), in batches cut as ntile."""
    if p99_ms is None:
        return 1.0
    finite = ok_rows[np.isfinite(ok_rows["latency_ms"].to_numpy(dtype=np.float64))]
    ordered = finite.sort_values(["t_sent_unix_s", "latency_ms"], kind="mergesort", na_position="last")
    above = (ordered["latency_ms"].to_numpy(dtype=np.float64) > p99_ms).astype(float)
    sizes = batch_sizes(len(above))
    starts = np.cumsum(sizes) - np.asarray(sizes)
    return dependence_factor(np.add.reduceat(above, starts) if len(above) else [], sizes)


def classify_outcomes(requests: pd.DataFrame) -> np.ndarray:
    """ok (0) / error (1) / timeout (2): timeouts are 408/504 or an error text that says so."""
    ok = requests["ok"].to_numpy(dtype=bool)
    status = requests["status_code"].to_numpy(dtype=np.float64)
    outcome = np.where(ok, OUTCOME_OK, OUTCOME_ERROR).astype(np.int8)
    timeout = np.isin(status, list(TIMEOUT_STATUS_CODES))
    error = requests["error"]
    if isinstance(error.dtype, pd.CategoricalDtype) and len(error.cat.categories):
        cats = error.cat.categories.astype(str).str.lower()
        timeout_cat = cats.str.contains("timeout") | cats.str.contains("timed out")
        codes = error.cat.codes.to_numpy()
        timeout |= (codes >= 0) & np.asarray(timeout_cat)[np.maximum(codes, 0)]
    outcome[(~ok) & timeout] = OUTCOME_TIMEOUT
    return outcome


def errors_by_kind(failed: pd.DataFrame) -> dict[str, int]:
    """Counts of failed rows by kind, most frequent first (see error_kind)."""
    if not len(failed):
        return {}
    keys = pd.DataFrame(
        {
            "status": failed["status_code"].to_numpy(dtype=np.float64),
            "error": failed["error"].astype(object).where(failed["error"].notna(), ""),
        }
    )
    counts: dict[str, int] = {}
    for (code, text), n in keys.value_counts(dropna=False).items():  # classify each distinct pair once
        kind = error_kind(code, str(text))
        counts[kind] = counts.get(kind, 0) + int(n)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def probe_mask(requests: pd.DataFrame) -> np.ndarray:
    """Expected-failure validation probes (endpoint starting with "validation") are not errors."""
    endpoint = requests["endpoint"]
    if isinstance(endpoint.dtype, pd.CategoricalDtype) and len(endpoint.cat.categories):
        is_probe = np.asarray(endpoint.cat.categories.astype(str).str.startswith(VALIDATION_ENDPOINT_PREFIX))
        codes = endpoint.cat.codes.to_numpy()
        return (codes >= 0) & is_probe[np.maximum(codes, 0)]
    return np.zeros(len(requests), dtype=bool)


def stage_windows(stages: list[StageRecord], requests: pd.DataFrame) -> dict[int, tuple[float, float]]:
    """Steady window per stage: [start + warmup, end]; a missing end falls back to the next start."""
    windows: dict[int, tuple[float, float]] = {}
    ordered = sorted(stages, key=lambda s: s.start_unix_s)
    for i, stage in enumerate(ordered):
        end = stage.end_unix_s
        if end is None and i + 1 < len(ordered):
            end = ordered[i + 1].start_unix_s
        if end is None:
            mine = requests["t_done_unix_s"][requests["stage_index"] == stage.index]
            end = float(mine.max()) if mine.notna().any() else stage.start_unix_s
        start = min(stage.start_unix_s + stage.warmup_s, end)
        windows[stage.index] = (start, float(end))
    return windows


def _assign_missing_stage(requests: pd.DataFrame, stages: list[StageRecord]) -> np.ndarray:
    """stage_index from the row, else from t_sent within the recorded stage boundaries."""
    stage_index = requests["stage_index"].to_numpy(dtype=np.float64).copy()
    missing = np.isnan(stage_index)
    if missing.any() and stages:
        ordered = sorted(stages, key=lambda s: s.start_unix_s)
        starts = np.array([s.start_unix_s for s in ordered])
        pos = np.searchsorted(starts, requests["t_sent_unix_s"].to_numpy()[missing], side="right") - 1
        indices = np.array([s.index for s in ordered], dtype=np.float64)
        stage_index[missing] = np.where(pos >= 0, indices[np.clip(pos, 0, None)], np.nan)
    return stage_index


def prepare_requests(requests: pd.DataFrame, stages: list[StageRecord]) -> PreparedRequests:
    """Assign stages, trim each stage's warm-up, drop rows that cannot be analysed (and count them)."""
    windows = stage_windows(stages, requests)
    frame = requests.copy()
    frame["stage_index"] = _assign_missing_stage(frame, stages)
    frame["outcome"] = classify_outcomes(frame)
    frame["probe"] = probe_mask(frame)
    ended = frame.loc[~frame["probe"].to_numpy(), ["t_sent_unix_s", "t_done_unix_s", "outcome"]].copy()
    known = frame["stage_index"].isin(list(windows)).to_numpy()
    null_latency = frame["latency_ms"].isna().to_numpy() & (frame["outcome"].to_numpy() == OUTCOME_OK)
    dropped = {"outside_stage": int((~known).sum()), "null_latency": int((known & null_latency).sum())}
    frame = frame[known & ~null_latency]
    steady_start = frame["stage_index"].map({k: v[0] for k, v in windows.items()}).to_numpy(dtype=np.float64)
    sent = frame["t_sent_unix_s"].to_numpy()
    in_warmup = sent < steady_start
    warmup_trimmed = (
        frame.loc[in_warmup, "stage_index"].astype(int).value_counts().to_dict() if in_warmup.any() else {}
    )
    frame = frame[~in_warmup].sort_values(["stage_index", "t_sent_unix_s"], kind="stable")
    frame = frame.reset_index(drop=True)
    stage_col = frame["stage_index"].to_numpy()
    slices: dict[int, slice] = {}
    for index in windows:
        lo = int(np.searchsorted(stage_col, index, side="left"))
        hi = int(np.searchsorted(stage_col, index, side="right"))
        slices[index] = slice(lo, hi)
    return PreparedRequests(
        rows=frame,
        slices=slices,
        windows=windows,
        warmup_trimmed={int(k): int(v) for k, v in warmup_trimmed.items()},
        dropped=dropped,
        ended=ended,
    )


def latency_stats(values: np.ndarray) -> LatencyStats:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return LatencyStats()
    pct = np.percentile(values, list(PERCENTILES_PCT.values()), method=PERCENTILE_METHOD)
    named = {f"{name}_ms": float(v) for name, v in zip(PERCENTILES_PCT, pct, strict=True)}
    return LatencyStats(n=len(values), mean_ms=float(values.mean()), max_ms=float(values.max()), **named)


def _mean(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(values.mean()) if len(values) else None


def server_stats(ok_rows: pd.DataFrame) -> ServerStats:
    total = ok_rows["srv_total_ms"].to_numpy(dtype=np.float64)
    has = np.isfinite(total)
    if not has.any():
        return ServerStats()
    rows = ok_rows[has]
    batch = rows["batch_size"].to_numpy(dtype=np.float64)
    batch = batch[np.isfinite(batch)]
    return ServerStats(
        n=int(has.sum()),
        queue_ms=_mean(rows["srv_queue_ms"].to_numpy(dtype=np.float64)),
        tokenize_ms=_mean(rows["srv_tokenize_ms"].to_numpy(dtype=np.float64)),
        compute_ms=_mean(rows["srv_compute_ms"].to_numpy(dtype=np.float64)),
        post_ms=_mean(rows["srv_post_ms"].to_numpy(dtype=np.float64)),
        total_ms=_mean(total[has]),
        batch_size_mean=float(batch.mean()) if len(batch) else None,
        batch_size_p50=float(np.median(batch)) if len(batch) else None,
        batch_size_max=float(batch.max()) if len(batch) else None,
    )


def open_loop_stats(rows: pd.DataFrame, lateness_tolerance_ms: float) -> OpenLoopStats:
    """A request sent more than the scenario's `open_loop.lateness_tolerance_ms` after its slot is late."""
    ok = rows["outcome"].to_numpy() == OUTCOME_OK
    from_intended = rows["latency_from_intended_ms"].to_numpy(dtype=np.float64)[ok]
    lateness_ms = (rows["t_sent_unix_s"].to_numpy() - rows["t_intended_unix_s"].to_numpy()) * 1000.0
    finite = lateness_ms[np.isfinite(lateness_ms)]
    return OpenLoopStats(
        from_intended=latency_stats(from_intended),
        n_late=int((finite > lateness_tolerance_ms).sum()),
        lateness_p99_ms=float(np.percentile(finite, 99.0, method=PERCENTILE_METHOD)) if len(finite) else None,
        n_dropped=int(rows["t_sent_unix_s"].isna().sum()),
    )


def step_stats(
    prepared: PreparedRequests,
    stage: StageRecord,
    open_loop: bool,
    n_boot: int = DEFAULT_N_BOOT,
    lateness_tolerance_ms: float = OpenLoop.model_fields["lateness_tolerance_ms"].default,
    fallback_model: str | None = None,
) -> StepStats:
    rows = prepared.rows.iloc[prepared.slices[stage.index]]
    start, end = prepared.windows[stage.index]
    duration_s = max(end - start, 1e-9)
    probe = rows["probe"].to_numpy()
    counted = rows[~probe]
    outcome = counted["outcome"].to_numpy()
    n_requests = len(counted)
    ok_rows = counted[outcome == OUTCOME_OK]
    ok_latency = np.sort(ok_rows["latency_ms"].to_numpy(dtype=np.float64))
    latency = latency_stats(ok_latency)
    dependence = send_order_dependence(ok_rows, latency.p99_ms)
    warnings: list[str] = []
    if n_requests == 0:
        warnings.append("no_samples")
    elif latency.n < MIN_SAMPLES_P99:
        warnings.append("few_samples_p99")
    elif latency.n < MIN_SAMPLES_P999:
        warnings.append("few_samples_p999")
    n_error = int((outcome == OUTCOME_ERROR).sum())
    n_timeout = int((outcome == OUTCOME_TIMEOUT).sum())
    not_ok = counted[outcome != OUTCOME_OK]
    goodput_qps = latency.n / duration_s
    return StepStats(
        index=stage.index,
        label=stage.label,
        users=stage.users,
        rate=stage.rate,
        steady_start_unix_s=start,
        steady_end_unix_s=end,
        duration_s=duration_s,
        n_requests=n_requests,
        n_ok=latency.n,
        n_error=n_error,
        n_timeout=n_timeout,
        n_probe=int(probe.sum()),
        n_warmup_trimmed=prepared.warmup_trimmed.get(stage.index, 0),
        qps=goodput_qps,
        ok_qps=goodput_qps,
        error_rate=(n_error + n_timeout) / n_requests if n_requests else None,
        goodput_qps=goodput_qps,
        offered_qps=n_requests / duration_s,
        errors_by_kind=errors_by_kind(not_ok),
        latency=latency,
        p99_ci_ms=interval(resampled_percentiles(ok_latency, 99.0, n_boot, rng_for(stage.index), dependence)),
        p99_dependence=round(dependence, 3),
        error_latency=latency_stats(not_ok["latency_ms"].to_numpy(dtype=np.float64)),
        server=server_stats(ok_rows),
        open_loop=open_loop_stats(counted, lateness_tolerance_ms) if open_loop else None,
        warnings=warnings,
        tokens_per_s=_tokens_per_s(ok_rows, duration_s),
        documents_per_s=_documents_per_s(ok_rows, duration_s),
        **_quality(ok_rows),
        **served_fields(served_model_counts(ok_rows), fallback_model),
        unavailable_s=_unavailable_s(prepared.ended, start, end, every_bin_wanted=not open_loop),
    )


def _unavailable_s(ended: pd.DataFrame | None, start: float, end: float, every_bin_wanted: bool) -> int | None:
    """The window's seconds without an ok answer, binned here in pandas (the engine bins in SQL)."""
    if ended is None:
        return None
    n_bins = bin_count(start, end)
    done = ended["t_done_unix_s"].to_numpy(dtype=np.float64)
    sent = ended["t_sent_unix_s"].to_numpy(dtype=np.float64)
    good = ended["outcome"].to_numpy() == OUTCOME_OK
    inside = (done >= start) & (done < end)
    bins = np.floor(done[inside] - start).astype(np.int64)
    spans = [
        spanned_bins(s, None if np.isnan(d) else d, start, n_bins)
        for s, d, g in zip(sent, done, good, strict=True)
        if not g and not np.isnan(s) and s < end and (np.isnan(d) or (d > start and d - s >= 1.0))
    ]
    return unavailable_seconds(
        n_bins, bins[good[inside]], bins[~good[inside]], spans, every_bin_wanted=every_bin_wanted
    )


def _quality(ok_rows: pd.DataFrame) -> dict[str, Any]:
    cos = ok_rows["probe_cosine"].to_numpy(dtype=np.float64) if "probe_cosine" in ok_rows else np.array([])
    cos = cos[~np.isnan(cos)]
    if not len(cos):
        return {}
    return {
        "n_quality_probes": len(cos),
        "quality_cosine_mean": float(cos.mean()),
        "quality_cosine_min": float(cos.min()),
    }


def _tokens_per_s(ok_rows: pd.DataFrame, duration_s: float) -> float | None:
    tokens = ok_rows["input_tokens"].to_numpy(dtype=np.float64) if "input_tokens" in ok_rows else np.array([])
    known = tokens[~np.isnan(tokens)]
    return float(known.sum() / duration_s) if len(known) else None


def _documents_per_s(ok_rows: pd.DataFrame, duration_s: float) -> float | None:
    """Rerank rows only: documents ranked per second (None when no ok row ranked any)."""
    docs = ok_rows["documents"].to_numpy(dtype=np.float64) if "documents" in ok_rows else np.array([])
    known = docs[~np.isnan(docs)]
    return float(known.sum() / duration_s) if len(known) else None


def served_model_counts(ok_rows: pd.DataFrame) -> dict[str, int]:
    """Ok rows per served model (rows without the header are not counted); empty for older run folders."""
    if "served_model" not in ok_rows or not len(ok_rows):
        return {}
    counts = ok_rows["served_model"].dropna().astype(str).value_counts()
    return ordered({str(k): int(v) for k, v in counts.items()})

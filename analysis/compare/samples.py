"""What a comparison resamples, read out of core: a bounded latency sample per step, per-second counts.

The percentile intervals of analysis/compare/changes.py resample each step's ok latencies. A 24 h step holds
100M of them, so each step gives a seeded reservoir of at most MAX_LATENCY_SAMPLES (DuckDB
`USING SAMPLE reservoir(...) REPEATABLE`, one thread so the seed fixes the draw); a step with fewer
rows gives every row, as before. Point estimates stay exact: the steps' own percentiles. Per-second ok
counts and token sums are GROUP BYs;
per-second telemetry means come from the run's in-memory telemetry index.
"""

from __future__ import annotations

import duckdb
import numpy as np

from analysis.compare.model import Samples, load_key
from analysis.engine import views
from analysis.model.telemetry import GENERATOR_DEVICE, SERVICE_DEVICE, window
from analysis.run.summary import RunAnalysis

MAX_LATENCY_SAMPLES = 100_000
SAMPLE_SEED = 20_240_601
_OK = "NOT probe AND outcome = 0"


def _latencies(con: duckdb.DuckDBPyConnection, where: str, seed: int) -> np.ndarray:
    rows = con.execute(
        f"SELECT latency_ms FROM (SELECT latency_ms FROM prepared WHERE {where}) "
        f"USING SAMPLE reservoir({MAX_LATENCY_SAMPLES} ROWS) REPEATABLE ({seed})"
    ).fetchnumpy()
    return np.sort(np.asarray(rows["latency_ms"], dtype=np.float64))


def _per_second(
    con: duckdb.DuckDBPyConnection, stage: int, start: float, end: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """ok counts and input-token sums per 1 s bin of [start, end] by send time (the last bin holds the rest),
    and the bins' widths."""
    duration = end - start
    if duration <= 0:
        return np.array([]), np.array([]), None
    n_bins = max(int(np.ceil(duration - 1e-9)), 1)
    widths = np.ones(n_bins)
    widths[-1] = duration - (n_bins - 1)
    rows = con.execute(
        f"""SELECT least(greatest(floor(t_sent_unix_s - ?), 0), ?)::BIGINT AS b, count(*),
                  sum(input_tokens::DOUBLE), count(input_tokens)
            FROM prepared WHERE {_OK} AND stage = ? AND isfinite(t_sent_unix_s) GROUP BY b""",
        [start, n_bins - 1, stage],
    ).fetchall()
    counts, tokens = np.zeros(n_bins), np.zeros(n_bins)
    known = False
    for b, n, token_sum, n_tokens in rows:
        counts[int(b)] = n
        if n_tokens:
            tokens[int(b)] = token_sum
            known = True
    return counts, widths, tokens if known else None


def telemetry_samples(analysis: RunAnalysis, start: float, end: float) -> dict[str, np.ndarray]:
    """Per-second means of each resource metric within the window."""
    index = analysis.telemetry
    out: dict[str, np.ndarray] = {}
    picks = (
        ("device_util_pct", index.accelerator, None, "device_util_pct"),
        ("mem_used_mb", index.accelerator, None, "mem_used_mb"),
        ("service_cpu_pct", index.other, SERVICE_DEVICE, "cpu_util_pct"),
        ("generator_cpu_pct", index.other, GENERATOR_DEVICE, "cpu_util_pct"),
    )
    for name, frame, device, metric in picks:
        if not len(frame):
            continue
        sub = window(frame, start, end)
        mask = (sub["metric"] == metric).to_numpy()  # labels compared as codes, no string per row
        if device is not None:
            mask = mask & (sub["device"] == device).to_numpy()
        sub = sub[mask]
        if len(sub):
            out[name] = sub.groupby(np.floor(sub["ts_unix_s"].to_numpy()))["value"].mean().to_numpy()
    return out


def step_samples(analysis: RunAnalysis) -> dict[int, Samples]:
    """Samples per stage index."""
    out: dict[int, Samples] = {}
    work = analysis.folder.analysis
    work.mkdir(parents=True, exist_ok=True)
    with views.connect(work) as con:
        views.create_views(con, views.request_files(analysis.folder, work), analysis.manifest.stages)
        con.execute("SET threads = 1")  # a REPEATABLE reservoir is reproducible on one thread only
        for step in analysis.summary.steps:
            s = step.stats
            counts, widths, tokens = _per_second(con, s.index, s.steady_start_unix_s, s.steady_end_unix_s)
            lat = s.latency
            out[s.index] = Samples(
                label=s.label, load_key=load_key(s.users, s.rate),
                latency_sorted=_latencies(con, f"{_OK} AND stage = {s.index}", SAMPLE_SEED + s.index),
                ok_counts=counts, bin_widths_s=widths,
                qps=float(counts.sum() / widths.sum()) if len(widths) else 0.0,
                n_requests=s.n_requests, n_failed=s.n_requests - s.n_ok,
                telemetry=telemetry_samples(analysis, s.steady_start_unix_s, s.steady_end_unix_s),
                token_counts=tokens, exact_ms={50.0: lat.p50_ms, 95.0: lat.p95_ms, 99.0: lat.p99_ms},
                n_ok=lat.n, unavailable_s=s.unavailable_s, p99_dependence=s.p99_dependence,
            )  # fmt: skip
    return out

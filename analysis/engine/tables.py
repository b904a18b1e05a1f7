"""Run-wide figures out of core: totals by outcome, outage windows, latency by input length, soak inputs.

From the views of analysis/engine/views.py (`tagged`: every row; `prepared`: steady, analysable rows), the
figures tests/oracles/in_memory computes from rows in memory. Percentiles come from order statistics
(order_stats.exact_percentiles), so they equal numpy's; the soak's per-minute P50/P99 use DuckDB's
quantile_cont (numpy's "linear" to the last bits, not bit for bit: 1,440 minutes would cost 1,440 passes).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from analysis.engine import order_stats
from analysis.engine import requests as ooc
from analysis.engine.minute_series import MinutePoint
from analysis.model.lengths import MAX_BINS, MIN_PER_BIN, LengthBin
from analysis.model.outage import OutageWindow, windows_from_seconds
from analysis.model.soak import SoakInputs


@dataclass(frozen=True)
class Totals:
    """Every request of the run (warm-up included, validation probes excluded), by outcome."""

    n_requests: int
    n_ok: int
    errors_by_kind: dict[str, int]


def totals(con: duckdb.DuckDBPyConnection) -> Totals:
    by_outcome = "SELECT count(*), count(*) FILTER (outcome = 0) FROM tagged WHERE NOT probe"
    [(n, n_ok)] = con.execute(by_outcome).fetchall()
    return Totals(int(n), int(n_ok), ooc.errors_by_kind(con, "tagged WHERE NOT probe", []))


def outage_windows(con: duckdb.DuckDBPyConnection) -> list[OutageWindow]:
    """The in-memory outage_windows (tests/oracles/in_memory/figures.py) over every row: connection errors and successes per whole second."""
    words = ("refused", "reset", "connection")
    said = " OR ".join(f"contains(lower(coalesce(error, '')), '{word}')" for word in words)
    conn = f"status_code IS NULL AND outcome <> 0 AND ({said})"
    valid = "isfinite(t_sent_unix_s)"
    row = con.execute(f"SELECT count(*) FROM tagged WHERE {valid} AND {conn}").fetchone()
    if row is None or not row[0]:
        return []
    rows = con.execute(
        f"""SELECT floor(t_sent_unix_s)::BIGINT AS s, count(*) FILTER ({conn}), count(*) FILTER (outcome = 0)
            FROM tagged WHERE {valid} GROUP BY s ORDER BY s"""
    ).fetchall()
    return windows_from_seconds([(int(s), int(n_conn), int(n_ok)) for s, n_conn, n_ok in rows])


def _lookup(by_rank: dict[int, float]) -> order_stats.OrderStats:
    return lambda wanted: {r: by_rank[r] for r in wanted}


def latency_by_input_tokens(con: duckdb.DuckDBPyConnection, max_bins: int = MAX_BINS) -> list[LengthBin]:
    """The in-memory latency_by_input_tokens (tests/oracles/in_memory/figures.py) over the ok, steady, non-probe rows of `prepared`."""
    con.execute(
        "CREATE OR REPLACE TEMP VIEW lengths AS SELECT input_tokens::DOUBLE AS tokens, latency_ms FROM prepared "
        "WHERE NOT probe AND outcome = 0 AND input_tokens IS NOT NULL AND NOT isnan(latency_ms)"
    )
    # token counts are integers with few distinct values: their histogram gives any order statistic exactly
    histogram = con.execute("SELECT tokens, count(*) FROM lengths GROUP BY tokens ORDER BY tokens").fetchall()
    n = sum(int(c) for _, c in histogram)
    if n == 0:
        return []
    if len(histogram) <= max_bins:  # few distinct lengths: one band each
        values = [float(v) for v, _ in histogram]
        band = "CASE tokens " + " ".join(f"WHEN {v!r} THEN {i}" for i, v in enumerate(values)) + " END"
    else:  # numpy's inverted_cdf edges: the ceil(n q)-th smallest value
        levels = np.linspace(0.0, 1.0, max_bins + 1)
        ranks = [max(int(np.ceil(n * q)) - 1, 0) for q in levels]
        cumulative = np.cumsum([int(c) for _, c in histogram])
        tokens = [float(v) for v, _ in histogram]
        edges = sorted({tokens[int(np.searchsorted(cumulative, r, side="right"))] for r in ranks})
        n_bands = len(edges) - 1
        counted = " + ".join(f"(tokens >= {e!r})::INT" for e in edges)
        band = f"least(greatest({counted} - 1, 0), {n_bands - 1})"
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW banded AS SELECT ({band}) AS band, tokens, latency_ms FROM lengths"
    )
    per_band = "SELECT band, min(tokens), max(tokens), count(*) FROM banded GROUP BY band ORDER BY band"
    bands = con.execute(per_band).fetchall()
    band_ranks = {
        int(b): sorted({r for q in (50.0, 99.0) for r in order_stats.linear_ranks(int(n), q)[:2]})
        for b, _, _, n in bands
    }
    quantiles: dict[int, list[float]] = {}
    sizes = {str(int(b)): int(n) for b, _, _, n in bands}
    for group in ooc.passes(sizes):  # as many bands a pass as DuckDB can hold the latencies of
        fractions = {b: ", ".join(repr((k + 0.5) / sizes[b]) for k in band_ranks[int(b)]) for b in group}
        parts = [f"quantile_disc(latency_ms, [{fractions[b]}]) FILTER (band = {int(b)})" for b in group]
        [row] = con.execute(f"SELECT {', '.join(parts)} FROM banded").fetchall()
        quantiles.update({int(b): list(values) for b, values in zip(group, row, strict=True)})
    out: list[LengthBin] = []
    for b, lo, hi, n in bands:
        by_rank = {k: float(v) for k, v in zip(band_ranks[int(b)], quantiles[int(b)], strict=True)}
        p50, p99 = order_stats.exact_percentiles(int(n), [50.0, 99.0], _lookup(by_rank))
        p99_ms = p99 if n >= MIN_PER_BIN else None
        out.append(LengthBin(lo_tokens=int(lo), hi_tokens=int(hi), n=int(n), p50_ms=p50, p99_ms=p99_ms))
    return out


def soak_inputs(con: duckdb.DuckDBPyConnection, t0: float, minutes: list[MinutePoint]) -> SoakInputs:
    """The in-memory soak_inputs (tests/oracles/in_memory/figures.py) from the per-minute points
    (minute_series.request_minutes) and `prepared`. The halves split at the middle steady row in (stage,
    send time) order: its send time is one order statistic of its step, so no pass sorts the run."""
    steady = "NOT probe"
    per_stage = con.execute(
        f"""SELECT stage, count(*), count(*) FILTER (outcome <> 0), count(t_sent_unix_s)
            FROM prepared WHERE {steady} GROUP BY stage ORDER BY stage"""
    ).fetchall()
    n = sum(int(r[1]) for r in per_stage)
    half = n // 2
    first_errors, before = 0, 0
    for stage, count, errors, n_sent in per_stage:
        if before + count <= half:
            first_errors += int(errors)
            before += int(count)
            continue
        wanted = min(half - before, int(n_sent))
        if wanted:
            [(cut,)] = con.execute(
                f"SELECT quantile_disc(t_sent_unix_s, ?) FROM prepared WHERE {steady} AND stage = ?",
                [(wanted - 0.5) / int(n_sent), stage],
            ).fetchall()
            [(got,)] = con.execute(
                f"SELECT count(*) FILTER (outcome <> 0) FROM prepared WHERE {steady} AND stage = ? "
                "AND t_sent_unix_s <= ?",
                [stage, cut],
            ).fetchall()
            first_errors += int(got)
        break
    all_errors = sum(int(r[2]) for r in per_stage)
    with_ok = [p for p in minutes if p.p99_ms is not None and p.p50_ms is not None]
    return SoakInputs(
        t0_unix_s=t0, minutes=[p.minute for p in with_ok],
        p50_ms=[float(p.p50_ms) for p in with_ok if p.p50_ms is not None],
        p99_ms=[float(p.p99_ms) for p in with_ok if p.p99_ms is not None],
        error_rate={p.minute: p.error_rate for p in minutes},
        error_rate_first_half=first_errors / half if half else None,
        error_rate_second_half=(all_errors - first_errors) / (n - half) if half else None,
    )  # fmt: skip

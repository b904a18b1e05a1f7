"""Out-of-core request statistics: DuckDB over requests.parquet, memory bounded whatever the run's length.

The figures of the step model (analysis/model/steps.py), computed without loading the request rows
(tests/oracles/in_memory computes them from rows in memory): counts, means and maxima in one grouped
scan; every order statistic a step needs (percentiles, the p99 bootstrap interval, the CDF figure) in
one more pass per step, interpolated exactly as numpy does (analysis/engine/order_stats.py): the
percentiles equal the in-memory ones bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from analysis.engine.availability import window_unavailable_s
from analysis.engine.order_stats import (
    OrderStats,
    bootstrap_percentile_ci,
    bootstrap_ranks,
    exact_percentiles,
    linear_ranks,
)
from analysis.engine.views import StepWindows
from analysis.figures.bootstrap import DEFAULT_N_BOOT
from analysis.model.decomposition import Decomposition
from analysis.model.served_models import ordered, served_fields, served_model_counts_by_stage
from analysis.model.steps import (
    MIN_SAMPLES_P99,
    MIN_SAMPLES_P999,
    PERCENTILES_PCT,
    LatencyStats,
    OpenLoopStats,
    ServerStats,
    StepStats,
)
from decisions.search.stats import DEPENDENCE_BATCHES, dependence_factor
from embedperf.error_kinds import error_kind
from embedperf.schema import StageRecord
from scenarios.models import OpenLoop

# Values one selection pass may hold (8 bytes each, plus DuckDB's growth): 16M keeps a pass near 300 MB.
PASS_VALUES = 16_000_000
# A pass of at most this many values fetches them sorted and picks the ranks itself: for a small step that
# is cheaper than DuckDB parsing and selecting thousands of quantile fractions (~2,000 for the bootstrap).
SORTED_PASS_VALUES = 100_000
CDF_POINTS = 200
CDF_LEVELS_PCT: tuple[float, ...] = tuple(float(q) for q in np.linspace(0.0, 100.0, CDF_POINTS))

_OK = "NOT probe AND outcome = 0"
_SRV = f"{_OK} AND isfinite(srv_total_ms)"
_DEC = f"{_OK} AND isfinite(latency_ms) AND isfinite(srv_total_ms)"
_LATENESS = "(t_sent_unix_s - t_intended_unix_s) * 1000.0"
_STEP = "stage = ? AND (stage_index = ? OR stage_index IS NULL)"  # bound to the stage index twice
_SERVER_STAGES = ("queue", "tokenize", "compute", "post")
SAMPLES: dict[str, tuple[str, str]] = {  # name -> (value expression, which rows)
    "ok": ("latency_ms", f"{_OK} AND isfinite(latency_ms)"),
    "error": ("latency_ms", "NOT probe AND outcome <> 0 AND isfinite(latency_ms)"),
    "intended": ("latency_from_intended_ms", f"{_OK} AND isfinite(latency_from_intended_ms)"),
    "lateness": (_LATENESS, f"NOT probe AND isfinite({_LATENESS})"),
    "batch": ("batch_size::DOUBLE", f"{_SRV} AND batch_size IS NOT NULL"),
}
_AGGREGATES = {
    "n_requests": "count(*) FILTER (NOT probe)",
    "n_probe": "count(*) FILTER (probe)",
    "n_error": "count(*) FILTER (NOT probe AND outcome = 1)",
    "n_timeout": "count(*) FILTER (NOT probe AND outcome = 2)",
    **{
        f"{name}_{agg}": f"{agg}({expr}) FILTER ({where})"
        for name, (expr, where) in SAMPLES.items()
        for agg in ("count", "avg", "max")
    },
    "srv_n": f"count(*) FILTER ({_SRV})",
    **{
        f"srv_{part}": f"avg(srv_{part}_ms) FILTER ({_SRV} AND isfinite(srv_{part}_ms))"
        for part in (*_SERVER_STAGES, "total")
    },
    "dec_n": f"count(*) FILTER ({_DEC})",
    "dec_latency": f"avg(latency_ms) FILTER ({_DEC})",
    "dec_client_network": f"avg(latency_ms - srv_total_ms) FILTER ({_DEC})",
    "dec_total": f"avg(srv_total_ms) FILTER ({_DEC})",
    **{
        f"dec_{part}": f"avg(CASE WHEN isnan(srv_{part}_ms) THEN 0 ELSE coalesce(srv_{part}_ms, 0) END) FILTER ({_DEC})"
        for part in _SERVER_STAGES
    },
    "n_dropped": "count(*) FILTER (NOT probe AND t_sent_unix_s IS NULL)",
    **{
        f"{name}_{agg}": f"{fn}({column}{cast}) FILTER ({_OK})"
        for name, column in (("tokens", "input_tokens"), ("inputs", "n_inputs"), ("documents", "documents"))
        for agg, fn, cast in (("n", "count", ""), ("sum", "sum", "::DOUBLE"))
    },
    **{
        f"cosine_{agg}": f"{agg}(probe_cosine) FILTER ({_OK} AND NOT isnan(probe_cosine))"
        for agg in ("count", "avg", "min")
    },
}


@dataclass
class StepAggregates:
    """What the in-memory analysis gets from rows, per step: StepStats, the decomposition, and the
    embeddings and input tokens of its ok requests (the energy figures divide power by them)."""

    stats: StepStats
    decomposition: Decomposition | None
    n_embeddings: float
    n_tokens: float | None
    cdf_ms: list[float]  # ok-latency quantiles at CDF_LEVELS_PCT (the CDF figure)


@dataclass
class RequestAggregates:
    steps: dict[int, StepAggregates]
    windows: dict[int, tuple[float, float]]
    warmup_trimmed: dict[int, int]
    dropped: dict[str, int]


def disc_order_stats(
    con: duckdb.DuckDBPyConnection, expr: str, rows: str, params: Sequence[object], n: int
) -> OrderStats:
    """Order statistics of `expr` over its n `rows` (`table WHERE ...`, params filling its ?s)."""

    def fetch(ranks: Sequence[int]) -> dict[int, float]:
        fractions = [(k + 0.5) / n for k in ranks]  # floor(n * f) == k, far from any rounding edge
        query = f"SELECT quantile_disc({expr}, ?) FROM {rows}"
        [(values,)] = con.execute(query, [fractions, *params]).fetchall()
        return {k: float(v) for k, v in zip(ranks, values, strict=True)}

    return fetch


def errors_by_kind(con: duckdb.DuckDBPyConnection, rows: str, params: Sequence[object]) -> dict[str, int]:
    """StepStats.errors_by_kind of the failed `rows` (`table WHERE ...`), one classification a pair."""
    query = f"SELECT status_code, coalesce(error, ''), count(*) FROM {rows} AND outcome <> 0 GROUP BY ALL"
    counts: dict[str, int] = {}
    for code, text, n in con.execute(query, params).fetchall():
        kind = error_kind(float(code) if code is not None else float("nan"), str(text))
        counts[kind] = counts.get(kind, 0) + int(n)
    return ordered(counts)


def passes(sizes: dict[str, int]) -> list[list[str]]:
    """Samples grouped so each pass holds at most PASS_VALUES values; a larger one goes alone."""
    groups: list[list[str]] = []
    held = 0
    for name in sorted(sizes, key=lambda k: sizes[k]):
        if groups and held + sizes[name] <= PASS_VALUES:
            groups[-1].append(name)
            held += sizes[name]
        else:
            groups.append([name])
            held = sizes[name]
    return groups


def step_order_stats(
    con: duckdb.DuckDBPyConnection, stage: int, wanted: dict[str, tuple[int, list[int]]]
) -> dict[str, OrderStats]:
    """The order statistics every sample of one step needs, in as few passes over its rows as memory allows:
    DuckDB holds a sample's values to select from them, so the samples share a pass while their
    values fit PASS_VALUES (see passes); a pass of at most SORTED_PASS_VALUES values fetches them sorted
    instead. Ranks not asked for here are still answered (a pass of their own), so callers never get a miss.
    """
    asked = {sample: (n, sorted(set(ranks))) for sample, (n, ranks) in wanted.items() if n and ranks}
    fetched: dict[str, dict[int, float]] = {}
    for group in passes({sample: n for sample, (n, _) in asked.items()}):
        whole = sum(asked[sample][0] for sample in group) <= SORTED_PASS_VALUES
        parts = []
        for sample in group:
            expr, where = SAMPLES[sample]
            n, unique = asked[sample]
            if whole:
                parts.append(f"list({expr} ORDER BY {expr}) FILTER ({where})")
            else:
                fractions = ", ".join(repr((k + 0.5) / n) for k in unique)
                parts.append(f"quantile_disc({expr}, [{fractions}]) FILTER ({where})")
        [row] = con.execute(f"SELECT {', '.join(parts)} FROM prepared WHERE {_STEP}", [stage] * 2).fetchall()
        for sample, values in zip(group, row, strict=True):
            unique = asked[sample][1]
            picked = [values[k] for k in unique] if whole else values
            fetched[sample] = {k: float(v) for k, v in zip(unique, picked, strict=True)}
    out = {}
    for sample, (n, _) in wanted.items():
        expr, where = SAMPLES[sample]
        fallback = disc_order_stats(con, expr, f"prepared WHERE {where} AND {_STEP}", [stage] * 2, n)
        out[sample] = _cached(fetched.get(sample, {}), fallback)
    return out


def _cached(cache: dict[int, float], fallback: OrderStats) -> OrderStats:
    def fetch(wanted: Sequence[int]) -> dict[int, float]:
        missing = [r for r in wanted if r not in cache]
        if missing:
            cache.update(fallback(missing))
        return {r: cache[r] for r in wanted}

    return fetch


def _latency_stats(sample: str, agg: dict[str, Any], order: OrderStats) -> LatencyStats:
    n = int(agg[f"{sample}_count"])
    if n == 0:
        return LatencyStats()
    values = exact_percentiles(n, list(PERCENTILES_PCT.values()), order)
    named = {f"{name}_ms": v for name, v in zip(PERCENTILES_PCT, values, strict=True)}
    return LatencyStats(n=n, mean_ms=float(agg[f"{sample}_avg"]), max_ms=float(agg[f"{sample}_max"]), **named)


def ok_dependence(con: duckdb.DuckDBPyConnection, stage: int, p99_ms: float | None) -> float:
    """The dependence factor of the step's ok latencies in send order, at their P99 (1 without one)."""
    if p99_ms is None:
        return 1.0
    expr, where = SAMPLES["ok"]
    rows = con.execute(
        f"SELECT count(*), count(*) FILTER (above) FROM (SELECT {expr} > ? AS above, "
        f"ntile({DEPENDENCE_BATCHES}) OVER (ORDER BY t_sent_unix_s, {expr}) AS batch FROM prepared "
        f"WHERE {where} AND stage = ? AND (stage_index = ? OR stage_index IS NULL)) GROUP BY batch",
        [p99_ms, stage, stage],
    ).fetchall()
    return dependence_factor([r[1] for r in rows], [r[0] for r in rows])


def _percentile(n: int, q_pct: float, order: OrderStats) -> float | None:
    return exact_percentiles(n, [q_pct], order)[0] if n else None


def _server_stats(agg: dict[str, Any], order: dict[str, OrderStats]) -> ServerStats:
    if not agg["srv_n"]:
        return ServerStats()
    n_batch = int(agg["batch_count"])
    return ServerStats(
        n=int(agg["srv_n"]), **{f"{part}_ms": agg[f"srv_{part}"] for part in (*_SERVER_STAGES, "total")},
        batch_size_mean=agg["batch_avg"] if n_batch else None,
        batch_size_p50=_percentile(n_batch, 50.0, order["batch"]),
        batch_size_max=float(agg["batch_max"]) if n_batch else None,
    )  # fmt: skip


def _open_loop_stats(
    con: duckdb.DuckDBPyConnection, stage: int, agg: dict[str, Any], tolerance_ms: float,
    order: dict[str, OrderStats],
) -> OpenLoopStats:  # fmt: skip
    late = f"SELECT count(*) FROM prepared WHERE {_STEP} AND NOT probe AND {_LATENESS} > ?"
    [(n_late,)] = con.execute(late, [stage, stage, tolerance_ms]).fetchall()
    return OpenLoopStats(
        from_intended=_latency_stats("intended", agg, order["intended"]), n_late=int(n_late),
        lateness_p99_ms=_percentile(int(agg["lateness_count"]), 99.0, order["lateness"]),
        n_dropped=int(agg["n_dropped"]),
    )  # fmt: skip


def _decomposition(agg: dict[str, Any]) -> Decomposition | None:
    n = int(agg["dec_n"])
    if n == 0:
        return None
    mean_latency = float(agg["dec_latency"])
    parts = {"client_network": float(agg["dec_client_network"])}
    parts |= {name: float(agg[f"dec_{name}"]) for name in _SERVER_STAGES}
    parts["server_other"] = float(agg["dec_total"]) - sum(parts[name] for name in _SERVER_STAGES)
    pct = {name: (value / mean_latency * 100.0 if mean_latency else 0.0) for name, value in parts.items()}
    return Decomposition(n=n, total_ms=mean_latency, parts_ms=parts, parts_pct=pct)


def _quality(agg: dict[str, Any]) -> dict[str, Any]:
    if not agg["cosine_count"]:
        return {}
    return {
        "n_quality_probes": int(agg["cosine_count"]), "quality_cosine_mean": float(agg["cosine_avg"]),
        "quality_cosine_min": float(agg["cosine_min"]),
    }  # fmt: skip


def _warnings(n_requests: int, n_ok: int) -> list[str]:
    if n_requests == 0:
        return ["no_samples"]
    if n_ok < MIN_SAMPLES_P99:
        return ["few_samples_p99"]
    return ["few_samples_p999"] if n_ok < MIN_SAMPLES_P999 else []


def _step_stats(
    con: duckdb.DuckDBPyConnection, stage: StageRecord, window: tuple[float, float], agg: dict[str, Any],
    trimmed: int, open_loop: bool, n_boot: int, lateness_tolerance_ms: float, served: dict[str, Any],
) -> tuple[StepStats, list[float]]:  # fmt: skip
    """The step's statistics and its ok-latency CDF (quantiles at CDF_LEVELS_PCT; empty without ok rows)."""
    start, end = window
    duration_s = max(end - start, 1e-9)
    n = {sample: int(agg[f"{sample}_count"]) for sample in SAMPLES}

    def ranks(sample: str, pcts: Sequence[float]) -> tuple[int, list[int]]:
        return n[sample], [r for q in pcts for r in linear_ranks(n[sample], q)[:2]] if n[sample] else []

    pcts = list(PERCENTILES_PCT.values())
    ok_n, ok_ranks = ranks("ok", [*pcts, *CDF_LEVELS_PCT])
    wanted = {
        "ok": (ok_n, ok_ranks + bootstrap_ranks(ok_n, 99.0, n_boot, stage.index)),
        "error": ranks("error", pcts), "batch": ranks("batch", [50.0]),
        **({"intended": ranks("intended", pcts), "lateness": ranks("lateness", [99.0])} if open_loop else {}),
    }  # fmt: skip
    order = step_order_stats(con, stage.index, wanted)  # every order statistic of the step in one pass
    latency = _latency_stats("ok", agg, order["ok"])
    n_requests, n_error, n_timeout = int(agg["n_requests"]), int(agg["n_error"]), int(agg["n_timeout"])
    goodput_qps = latency.n / duration_s
    dependence = ok_dependence(con, stage.index, latency.p99_ms)
    cdf_ms = exact_percentiles(latency.n, list(CDF_LEVELS_PCT), order["ok"]) if latency.n else []
    stats = StepStats(
        index=stage.index, label=stage.label, users=stage.users, rate=stage.rate, steady_start_unix_s=start,
        steady_end_unix_s=end, duration_s=duration_s, n_requests=n_requests, n_ok=latency.n, n_error=n_error,
        n_timeout=n_timeout, n_probe=int(agg["n_probe"]), n_warmup_trimmed=trimmed, qps=goodput_qps,
        ok_qps=goodput_qps, error_rate=(n_error + n_timeout) / n_requests if n_requests else None,
        goodput_qps=goodput_qps, offered_qps=n_requests / duration_s,
        tokens_per_s=float(agg["tokens_sum"]) / duration_s if agg["tokens_n"] else None,
        documents_per_s=float(agg["documents_sum"]) / duration_s if agg["documents_n"] else None,
        **_quality(agg), **served,
        errors_by_kind=errors_by_kind(con, f"prepared WHERE {_STEP} AND NOT probe", [stage.index] * 2)
        if n_error + n_timeout else {},
        latency=latency,
        p99_ci_ms=bootstrap_percentile_ci(latency.n, 99.0, order["ok"], n_boot, stage.index, dependence),
        p99_dependence=round(dependence, 3),
        error_latency=_latency_stats("error", agg, order["error"]), server=_server_stats(agg, order),
        open_loop=_open_loop_stats(con, stage.index, agg, lateness_tolerance_ms, order) if open_loop
        else None,
        warnings=_warnings(n_requests, latency.n),
        unavailable_s=window_unavailable_s(con, start, end, every_bin_wanted=not open_loop),
    )  # fmt: skip
    return stats, cdf_ms


def request_aggregates(
    con: duckdb.DuckDBPyConnection, stages: list[StageRecord], windows: StepWindows, open_loop: bool,
    n_boot: int = DEFAULT_N_BOOT,
    lateness_tolerance_ms: float = OpenLoop.model_fields["lateness_tolerance_ms"].default,
    fallback_model: str | None = None,
) -> RequestAggregates:  # fmt: skip
    """Every per-step figure of the run from the `prepared` view (create_views first); fallback_model: the
    target's /info `fallback_model`, whose share of each step's answers is counted."""
    names = list(_AGGREGATES)
    select = ", ".join(f"{expr} AS {name}" for name, expr in _AGGREGATES.items())
    rows = con.execute(f"SELECT stage, {select} FROM prepared GROUP BY stage").fetchall()
    by_stage = {int(r[0]): dict(zip(names, r[1:], strict=True)) for r in rows}
    empty = {name: 0 if name.startswith("n_") or name.endswith(("_count", "_n")) else None for name in names}
    per_stage = con.execute(
        "SELECT stage, count(*) FILTER (NOT known), count(*) FILTER (known AND null_latency), "
        "count(*) FILTER (known AND NOT null_latency AND in_warmup) FROM checked GROUP BY stage"
    ).fetchall()
    trimmed = {int(r[0]): int(r[3]) for r in per_stage if r[3]}
    outside, null_latency = (int(sum(r[i] for r in per_stage)) for i in (1, 2))
    served = served_model_counts_by_stage(con)
    steps: dict[int, StepAggregates] = {}
    for stage in sorted(stages, key=lambda s: s.index):
        agg = by_stage.get(stage.index, empty)
        stats, cdf_ms = _step_stats(
            con, stage, windows.windows[stage.index], agg, trimmed.get(stage.index, 0), open_loop, n_boot,
            lateness_tolerance_ms, served_fields(served.get(stage.index, {}), fallback_model),
        )  # fmt: skip
        steps[stage.index] = StepAggregates(
            stats=stats, decomposition=_decomposition(agg),
            n_embeddings=float(agg["inputs_sum"]) if agg["inputs_n"] else float(agg["ok_count"]),
            n_tokens=float(agg["tokens_sum"]) if agg["tokens_n"] and agg["tokens_sum"] else None,
            cdf_ms=cdf_ms,
        )  # fmt: skip
    return RequestAggregates(
        steps=steps, windows=windows.windows, warmup_trimmed={int(k): int(v) for k, v in trimmed.items()},
        dropped={"outside_stage": outside, "null_latency": null_latency},
    )  # fmt: skip

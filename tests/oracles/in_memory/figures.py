"""Figures of the report computed from rows in memory: the references for their out-of-core versions."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.figures.soak import MINUTE_S, soak_result
from analysis.model.decomposition import Decomposition
from analysis.model.lengths import MAX_BINS, MIN_PER_BIN, LengthBin
from analysis.model.outage import OutageWindow, windows_from_seconds
from analysis.model.slowest import COLUMNS, SLOWEST_REQUESTS, SlowRequest, slow_request
from analysis.model.soak import SoakInputs, SoakResult
from analysis.model.steps import OUTCOME_OK, PERCENTILE_METHOD
from tests.oracles.in_memory.steps import classify_outcomes


def latency_by_input_tokens(rows: pd.DataFrame, max_bins: int = MAX_BINS) -> list[LengthBin]:
    """Bands of equal request counts (quantile edges) over the ok, steady, non-probe requests.

    Empty when the target reports no token counts (the `input_tokens` column is then all missing).
    """
    if "input_tokens" not in rows or not len(rows):
        return []
    keep = rows["outcome"].to_numpy() == OUTCOME_OK
    if "probe" in rows:
        keep &= ~rows["probe"].to_numpy(dtype=bool)
    tokens = rows["input_tokens"].to_numpy(dtype=np.float64)[keep]
    latency = rows["latency_ms"].to_numpy(dtype=np.float64)[keep]
    known = ~np.isnan(tokens) & ~np.isnan(latency)
    tokens, latency = tokens[known], latency[known]
    if not len(tokens):
        return []
    values = np.unique(tokens)
    if len(values) <= max_bins:  # few distinct lengths: one band each
        band = np.searchsorted(values, tokens)
        n_bands = len(values)
    else:  # quantile edges; a band holds [edge_i, edge_i+1), the last one its upper edge too
        edges = np.unique(np.quantile(tokens, np.linspace(0.0, 1.0, max_bins + 1), method="inverted_cdf"))
        n_bands = len(edges) - 1
        band = np.clip(np.searchsorted(edges, tokens, side="right") - 1, 0, n_bands - 1)
    out: list[LengthBin] = []
    for i in range(n_bands):
        in_band = band == i
        if not in_band.any():
            continue
        lat = latency[in_band]
        out.append(
            LengthBin(
                lo_tokens=int(tokens[in_band].min()),
                hi_tokens=int(tokens[in_band].max()),
                n=int(in_band.sum()),
                p50_ms=float(np.percentile(lat, 50.0, method=PERCENTILE_METHOD)),
                p99_ms=float(np.percentile(lat, 99.0, method=PERCENTILE_METHOD))
                if len(lat) >= MIN_PER_BIN
                else None,
            )
        )
    return out


def soak_inputs(rows: pd.DataFrame) -> SoakInputs:
    """rows: steady, non-probe request rows with an `outcome` column, sorted by stage and send time."""
    t_s = rows["t_sent_unix_s"].to_numpy()
    t0 = float(np.nanmin(t_s)) if len(t_s) else 0.0
    minute = np.floor((t_s - t0) / MINUTE_S)
    frame = pd.DataFrame(
        {"minute": minute, "latency_ms": rows["latency_ms"].to_numpy(), "ok": rows["outcome"].to_numpy() == 0}
    )
    ok = frame[frame["ok"]]
    grouped = ok.groupby("minute")["latency_ms"]
    p50 = grouped.quantile(0.5, interpolation=PERCENTILE_METHOD)
    p99 = grouped.quantile(0.99, interpolation=PERCENTILE_METHOD)
    err = 1.0 - frame.groupby("minute")["ok"].mean()
    outcome = rows["outcome"].to_numpy()
    half = len(outcome) // 2
    return SoakInputs(
        t0_unix_s=t0,
        minutes=[int(m) for m in p99.index],
        p50_ms=[float(v) for v in p50.to_numpy()],
        p99_ms=[float(v) for v in p99.to_numpy()],
        error_rate={int(m): float(v) for m, v in err.items()},
        error_rate_first_half=float((outcome[:half] != OUTCOME_OK).mean()) if half else None,
        error_rate_second_half=float((outcome[half:] != OUTCOME_OK).mean()) if half else None,
    )


def soak_trends(rows: pd.DataFrame, rss_t_s: np.ndarray, rss_mb: np.ndarray) -> SoakResult:
    """rows: steady, non-probe request rows with an `outcome` column."""
    return soak_result(soak_inputs(rows), rss_t_s, rss_mb)




def connection_error_mask(requests: pd.DataFrame, ok: np.ndarray) -> np.ndarray:
    """Failed rows that never got an HTTP answer because the connection failed (not timeouts)."""
    no_status = requests["status_code"].isna().to_numpy()
    text = requests["error"].astype(object).fillna("").astype(str).str.lower()
    connection = text.str.contains("refused") | text.str.contains("reset") | text.str.contains("connection")
    return no_status & ~ok & connection.to_numpy()


def outage_windows(requests: pd.DataFrame) -> list[OutageWindow]:
    """Windows over a run's raw request rows (every row, warm-up included: an outage has no warm-up).

    Seconds without any request (users backing off) inside a window do not split it; a second
    with a successful request does.
    """
    if not len(requests):
        return []
    ok = classify_outcomes(requests) == OUTCOME_OK
    conn = connection_error_mask(requests, ok)
    sent = requests["t_sent_unix_s"].to_numpy(dtype=np.float64)
    valid = np.isfinite(sent)
    if not (conn & valid).any():
        return []
    second = np.floor(sent[valid]).astype(np.int64)
    per_s = pd.DataFrame({"s": second, "conn": conn[valid], "ok": ok[valid]}).groupby("s").sum()
    return windows_from_seconds(
        [
            (int(sec), int(n_conn), int(n_ok))
            for sec, n_conn, n_ok in zip(per_s.index, per_s["conn"], per_s["ok"], strict=True)
        ]
    )




def telemetry_gaps(telemetry: pd.DataFrame, t0: float | None, t1: float | None) -> dict[str, int]:
    """Missing whole seconds per source within [t0, t1] (a 1 Hz source should fill every second)."""
    if not len(telemetry) or t0 is None or t1 is None or t1 <= t0:
        return {}
    expected = int(np.floor(t1) - np.floor(t0)) + 1
    gaps: dict[str, int] = {}
    ts = telemetry["ts_unix_s"].to_numpy()
    inside = (ts >= np.floor(t0)) & (ts < np.floor(t1) + 1)
    sub = telemetry[inside]
    for source, group in sub.groupby(sub["source"].astype(str)):
        present = len(np.unique(np.floor(group["ts_unix_s"].to_numpy())))
        gaps[str(source)] = max(expected - present, 0)
    return gaps


def decompose(ok_rows: pd.DataFrame) -> Decomposition | None:
    """None when the target sent no Server-Timing (a third-party endpoint)."""
    latency = ok_rows["latency_ms"].to_numpy(dtype=np.float64)
    total = ok_rows["srv_total_ms"].to_numpy(dtype=np.float64)
    stages = {
        name: np.nan_to_num(ok_rows[f"srv_{name}_ms"].to_numpy(dtype=np.float64), nan=0.0)
        for name in ("queue", "tokenize", "compute", "post")
    }
    has = np.isfinite(latency) & np.isfinite(total)
    n = int(has.sum())
    if n == 0:
        return None
    mean_latency = float(latency[has].mean())
    parts = {"client_network": float((latency[has] - total[has]).mean())}
    for name, values in stages.items():
        parts[name] = float(values[has].mean())
    parts["server_other"] = float(total[has].mean()) - sum(parts[name] for name in stages)
    pct = {name: (value / mean_latency * 100.0 if mean_latency else 0.0) for name, value in parts.items()}
    return Decomposition(n=n, total_ms=mean_latency, parts_ms=parts, parts_pct=pct)


def slowest_requests(rows: pd.DataFrame, limit: int = SLOWEST_REQUESTS) -> list[SlowRequest]:
    """The in-memory reference over analysis.model.steps.prepare_requests' rows (outcome and probe added)."""
    latency = rows["latency_ms"].to_numpy(dtype=np.float64) if len(rows) else np.array([])
    keep = (rows["outcome"].to_numpy() == OUTCOME_OK) & ~rows["probe"].to_numpy() & np.isfinite(latency)
    ok = rows.loc[keep, list(COLUMNS)]
    if not len(ok):
        return []
    ordered = ok.assign(_id=ok["request_id"].astype(object)).sort_values(
        ["latency_ms", "t_sent_unix_s", "_id"],
        ascending=[False, True, True],
        na_position="last",
        kind="stable",
    )
    return [slow_request(values) for values in ordered.head(limit).to_dict("records")]







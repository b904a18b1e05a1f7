"""Latency against input length: P50/P99 per band of input tokens (padding and length drive embedding cost)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel

from analysis.steps import OUTCOME_OK, PERCENTILE_METHOD

MAX_BINS = 8
MIN_PER_BIN = 20  # fewer ok requests than this in a band and its P99 is not shown


class LengthBin(BaseModel):
    """Ok requests whose input tokens fall in [lo_tokens, hi_tokens]."""

    lo_tokens: int
    hi_tokens: int
    n: int
    p50_ms: float
    p99_ms: float | None


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

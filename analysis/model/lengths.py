"""Latency against input length: P50/P99 per band of input tokens (padding and length drive embedding cost)."""

from __future__ import annotations

from pydantic import BaseModel

MAX_BINS = 8
MIN_PER_BIN = 20  # fewer ok requests than this in a band and its P99 is not shown


class LengthBin(BaseModel):
    """Ok requests whose input tokens fall in [lo_tokens, hi_tokens]."""

    lo_tokens: int
    hi_tokens: int
    n: int
    p50_ms: float
    p99_ms: float | None



"""What the report's figures draw, computed out of core: series, CDFs, histograms, tables — never rows."""

from __future__ import annotations

from pydantic import BaseModel

from analysis.engine.minute_series import MinutePoint, RequestSeries
from analysis.model.lengths import LengthBin


class ReportFigures(BaseModel):
    """Figure inputs of one run (analysis/run/analyse.py fills them; reports/figures.py draws them)."""

    request_series: RequestSeries | None = None
    cdf_ms: dict[int, list[float]] = {}  # ok-latency quantiles at evenly spaced levels, per step
    batch_sizes: dict[int, dict[int, int]] = {}  # rows per server batch size, per step
    top_errors: list[tuple[str, int]] = []  # "status error" texts of failed steady rows, most frequent first
    lengths: list[LengthBin] = []  # latency by input tokens
    embeddings: dict[int, float] = {}  # embeddings (inputs) of ok requests per step
    tokens: dict[int, float | None] = {}  # input tokens of ok requests per step (None: none reported)
    minutes: list[MinutePoint] = []  # per-minute series of a soak

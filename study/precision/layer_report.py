"""What the layer-by-layer comparison reports (study/precision/layers.py computes it with torch; these models do not
need torch, so a precision result is read and written without it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

PointKind = Literal["layer", "linear"]


class LayerAgreement(BaseModel):
    """One hooked module: its output's cosine to fp32 (mean, P5, min over valid tokens of every input) and
    relative error ‖cand − ref‖ / ‖ref‖ (mean, P95, max)."""

    name: str
    kind: PointKind
    depth: int  # 1-based index of the encoder layer it belongs to
    n_tokens: int
    cosine_mean: float
    cosine_p5: float
    cosine_min: float
    rel_error_mean: float
    rel_error_p95: float
    rel_error_max: float
    drop: float  # mean cosine lost against the previous layer's output (1.0 before the first layer)


class LayerReport(BaseModel):
    gate: float
    n_texts: int
    layers: list[LayerAgreement]
    linears: list[LayerAgreement]
    first_below_gate: str | None  # the first layer whose mean cosine is below the gate
    largest_drop: str | None  # the layer that loses the most mean cosine against its input
    largest_drop_linear: str | None  # the Linear that loses the most against its layer's input

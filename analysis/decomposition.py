"""Latency decomposition: where a request's time went, measured from the server's Server-Timing header.

Over the ok rows of a step that carry server timings, the mean client latency splits exactly into
client-and-network (latency - srv_total), queue, tokenise, device compute, post-processing and
"server other" (srv_total minus the four named stages: time the server spent outside them). The parts
are means over the same rows, so they sum to the mean latency of those rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel

COMPONENTS: tuple[str, ...] = ("client_network", "queue", "tokenize", "compute", "post", "server_other")


class Decomposition(BaseModel):
    """Mean ms per component and its share of the total; `total_ms` is the mean latency of `n` rows."""

    n: int
    total_ms: float
    parts_ms: dict[str, float]
    parts_pct: dict[str, float]


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

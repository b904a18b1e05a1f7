"""Latency decomposition: where a request's time went, measured from the server's Server-Timing header.

Over the ok rows of a step that carry server timings, the mean client latency splits exactly into
client-and-network (latency - srv_total), queue, tokenise, device compute, post-processing and
"server other" (srv_total minus the four named stages: time the server spent outside them). The parts
are means over the same rows, so they sum to the mean latency of those rows.
"""

from __future__ import annotations

from pydantic import BaseModel

COMPONENTS: tuple[str, ...] = ("client_network", "queue", "tokenize", "compute", "post", "server_other")


class Decomposition(BaseModel):
    """Mean ms per component and its share of the total; `total_ms` is the mean latency of `n` rows."""

    n: int
    total_ms: float
    parts_ms: dict[str, float]
    parts_pct: dict[str, float]



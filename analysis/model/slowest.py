"""The run's slowest requests, each with the ID it was sent with, so the service's log finds it.

The report lists the slowest successful requests of the steady state (the ones behind its P99 and
max) with their X-Request-ID, the model that answered and the server's own time: a top-N over DuckDB's
`prepared` view (analysis/engine/requests.py) that holds N rows, whatever the run's length. Ties are
broken by send time, then ID, so the in-memory reference (tests/oracles/in_memory) agrees row for row.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import duckdb

SLOWEST_REQUESTS = 10
COLUMNS: tuple[str, ...] = (
    "stage_index", "t_sent_unix_s", "latency_ms", "srv_total_ms", "n_inputs", "input_tokens", "worker",
    "request_id", "served_model",
)  # fmt: skip


class SlowRequest(BaseModel):
    """One slow, successful request as recorded (request_id None: an older run folder)."""

    stage_index: int
    t_sent_unix_s: float | None
    latency_ms: float
    srv_total_ms: float | None = Field(None, description="The server's own total (Server-Timing), if sent.")
    n_inputs: int | None = None
    input_tokens: int | None = None
    worker: str | None = None
    request_id: str | None = Field(
        None, description="The X-Request-ID sent: search the service's log for it."
    )
    served_model: str | None = Field(default=None, description="The X-Served-Model of the answer, if sent.")


def _value(value: Any) -> Any:
    """Missing values as None (pandas gives NaN for a missing number or category)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def slow_request(values: dict[str, Any]) -> SlowRequest:
    row = {name: _value(values[name]) for name in COLUMNS}
    for name in ("stage_index", "n_inputs", "input_tokens"):  # integers read back as floats in memory
        row[name] = int(row[name]) if row[name] is not None else None
    for name in ("worker", "request_id", "served_model"):
        row[name] = str(row[name]) if row[name] is not None else None
    return SlowRequest.model_validate(row)


def slowest_requests_ooc(con: duckdb.DuckDBPyConnection, limit: int = SLOWEST_REQUESTS) -> list[SlowRequest]:
    """The same list from the `prepared` view (stage: the step the analysis assigned the row to)."""
    columns = ", ".join("stage AS stage_index" if c == "stage_index" else c for c in COLUMNS)
    cursor = con.execute(
        f"SELECT {columns} FROM prepared WHERE NOT probe AND outcome = 0 AND isfinite(latency_ms) "
        "ORDER BY latency_ms DESC, t_sent_unix_s ASC NULLS LAST, request_id ASC NULLS LAST LIMIT ?",
        [limit],
    )
    return [slow_request(dict(zip(COLUMNS, row, strict=True))) for row in cursor.fetchall()]

"""The request row: one typed record per request, and the Arrow schema of requests.parquet derived from it.

Each field is a column; its Arrow type sits beside it, so the record the load generator fills, the
Parquet schema the recorder writes and the value order the distributed path forwards are one
definition. Timestamps are kept raw; durations are derived in analysis/.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

import pyarrow as pa


def _column(arrow_type: pa.DataType) -> Any:
    return field(default=None, metadata={"arrow": arrow_type})


@dataclass(slots=True)
class RequestRow:
    """One request as recorded. Every column is nullable: a field the request did not reach stays None. On the
    request path the seven server-timing columns hold the raw `Server-Timing` and batch header values
    (loadgen.traffic.headers.raw_timing_values); the recorder parses them a batch at a time."""

    run_id: str | None = _column(pa.string())  # set by the recorder
    worker: str | None = _column(pa.string())
    stage_index: int | None = _column(pa.int32())  # stage columns: set by the sender, else by the recorder
    stage_label: str | None = _column(pa.string())
    target_users: int | None = _column(pa.int32())
    target_rate: float | None = _column(pa.float64())
    t_intended_unix_s: float | None = _column(pa.float64())  # open loop: scheduled; closed loop: = sent
    t_sent_unix_s: float | None = _column(pa.float64())
    t_done_unix_s: float | None = _column(pa.float64())
    latency_ms: float | None = _column(pa.float64())  # done - sent
    latency_from_intended_ms: float | None = _column(pa.float64())  # done - intended: free of coordinated omission
    endpoint: str | None = _column(pa.string())
    status_code: int | None = _column(pa.int32())
    ok: bool | None = _column(pa.bool_())
    error: str | None = _column(pa.string())
    n_inputs: int | None = _column(pa.int32())
    input_chars: int | None = _column(pa.int64())
    input_tokens: int | None = _column(pa.int64())
    response_bytes: int | None = _column(pa.int64())
    srv_queue_ms: Any = _column(pa.float64())  # raw Server-Timing header until the recorder parses it
    srv_tokenize_ms: Any = _column(pa.float64())
    srv_compute_ms: Any = _column(pa.float64())
    srv_post_ms: Any = _column(pa.float64())
    srv_total_ms: Any = _column(pa.float64())
    batch_size: Any = _column(pa.int32())  # raw X-Batch-Size until parsed
    batch_tokens: Any = _column(pa.int64())  # raw X-Batch-Tokens until parsed
    # quality probes (payload.quality_probes): cosine of the answer to the stored fp32 reference
    probe_cosine: float | None = _column(pa.float64())
    # the X-Request-ID embedperf sent (null: never sent), so the service's log line can be found
    request_id: str | None = _column(pa.string())
    # the X-Served-Model the answer named (null: the target does not send it), e.g. a fallback model
    served_model: Any = _column(pa.string())
    # a canary run's side of the request: baseline | candidate (null: an ordinary run)
    side: str | None = _column(pa.string())
    # a canary's agreement sample: the lowest cosine between this answer and the other side's for the same
    # texts, on the second request of the pair (null: not a sample)
    agreement_cosine: float | None = _column(pa.float64())
    # rerank (payload.task rerank): documents ranked against the request's query (null: other tasks)
    documents: int | None = _column(pa.int32())

    def values(self) -> list[Any]:
        """The row's values in REQUEST_COLUMNS order: what the recorder appends and a worker forwards."""
        return list(_VALUES(self))


REQUEST_SCHEMA = pa.schema([(f.name, f.metadata["arrow"]) for f in fields(RequestRow)])
REQUEST_COLUMNS: tuple[str, ...] = tuple(REQUEST_SCHEMA.names)
_VALUES = attrgetter(*REQUEST_COLUMNS)

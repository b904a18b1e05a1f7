"""What the run summary takes from the request rows: read out of core (analysis/run/analyse.py), computed
from rows in memory by the reference the equality tests compare against (tests/oracles/in_memory)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from analysis.model.decomposition import Decomposition
from analysis.model.outage import OutageWindow
from analysis.model.slowest import SlowRequest
from analysis.model.soak import SoakInputs
from analysis.model.steps import StepStats


class RequestTotals(BaseModel):
    """Every request of the run (warm-up included, validation probes excluded), by outcome."""

    n_requests: int = 0
    n_ok: int = 0
    n_failed: int = 0
    error_rate: float | None = None
    errors_by_kind: dict[str, int] = {}

    @property
    def most_common_error(self) -> str | None:
        return next(iter(self.errors_by_kind), None)

    @classmethod
    def of(cls, n_requests: int, n_ok: int, errors: dict[str, int]) -> RequestTotals:
        n_failed = n_requests - n_ok
        error_rate = n_failed / n_requests if n_requests else None
        return cls(
            n_requests=n_requests, n_ok=n_ok, n_failed=n_failed, error_rate=error_rate, errors_by_kind=errors
        )


@dataclass
class RowFigures:
    """Per-step statistics and run-wide figures from the request rows; nothing here holds a row."""

    stats: list[StepStats]
    decomposition: dict[int, Decomposition | None]
    dropped: dict[str, int]
    warmup_trimmed: dict[int, int]
    totals: RequestTotals
    outage_windows: list[OutageWindow]
    t_done_max_unix_s: float | None
    soak: SoakInputs | None
    slowest: list[SlowRequest]  # the slowest ok requests of the steady state, with their IDs
    # inputs embedded by each step's ok requests (n_ok where the rows carry no n_inputs): what cost divides by
    embeddings: dict[int, float] = field(default_factory=dict)

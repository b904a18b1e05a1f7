"""Bounded exponential back-off for users whose requests get no answer or are told to come back later (429,
503): without it a closed-loop user retries a dead or shedding target at once, thousands of failures per
second that saturate the generator and read as throughput. Real clients (the openai SDK) wait likewise."""

from __future__ import annotations

from embedperf.schema import RequestRow

BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 2.0
RETRY_LATER_STATUSES = frozenset({429, 503})


class Backoff:
    """One user's back-off state."""

    def __init__(self, first_s: float = BACKOFF_FIRST_S, max_s: float = BACKOFF_MAX_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.delay_s = 0.0

    def after(self, row: RequestRow) -> float:
        """Seconds to wait after this request's row; 0 when it got an answer."""
        status = row.status_code
        if row.ok or (status is not None and status not in RETRY_LATER_STATUSES):
            self.delay_s = 0.0
            return 0.0
        self.delay_s = min(self.max_s, self.delay_s * 2.0 if self.delay_s else self.first_s)
        return self.delay_s

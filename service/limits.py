"""Admission limits in front of the queue: a concurrency cap and a token-bucket rate limit (both -> 429)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class ConcurrencyLimit:
    """At most `limit` requests in flight (0 = unlimited); over it a request is refused, not queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        with self._lock:
            if self.limit and self.inflight >= self.limit:
                return False
            self.inflight += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.inflight -= 1


class RateLimit:
    """Token bucket of `qps` requests per second with a one-second burst (0 = unlimited)."""

    def __init__(self, qps: float, clock: Callable[[], float] | None = None) -> None:
        self.qps = qps
        self.burst = max(1.0, qps)
        self._tokens = self.burst
        self._clock = clock or time.monotonic
        self._t_last_s = self._clock()
        self._lock = threading.Lock()

    def try_acquire(self) -> tuple[bool, int]:
        """(admitted, retry_after_s): retry_after_s says when a token will next be available."""
        if not self.qps:
            return True, 0
        with self._lock:
            now_s = self._clock()
            self._tokens = min(self.burst, self._tokens + (now_s - self._t_last_s) * self.qps)
            self._t_last_s = now_s
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True, 0
            return False, max(1, math.ceil((1.0 - self._tokens) / self.qps))

"""Busy time over a sliding window: the share of the last seconds spent computing, from recorded spans."""

from __future__ import annotations

import collections
import threading
import time

BUSY_WINDOW_S = 10.0


class BusyWindow:
    """Compute spans of the last horizon_s (BUSY_WINDOW_S by default), shared by `lanes` workers (the fraction
    is their mean)."""

    def __init__(self, lanes: int = 1, horizon_s: float = BUSY_WINDOW_S) -> None:
        self.lanes = lanes
        self.horizon_s = horizon_s
        self._spans: collections.deque[tuple[float, float]] = collections.deque()  # (end, duration) in s
        self._lock = threading.Lock()

    def record(self, t_end_s: float, compute_s: float) -> None:
        with self._lock:
            self._spans.append((t_end_s, compute_s))
            while self._spans and self._spans[0][0] < t_end_s - self.horizon_s:
                self._spans.popleft()

    def fraction(self, window_s: float = BUSY_WINDOW_S) -> float:
        """Share of the last window_s spent computing, 0..1 (spans cut at the window's start)."""
        start_s = time.perf_counter() - window_s
        with self._lock:
            spans = list(self._spans)
        busy_s = sum(
            max(0.0, end_s - max(start_s, end_s - dur_s)) for end_s, dur_s in spans if end_s > start_s
        )
        return min(1.0, busy_s / (window_s * self.lanes))

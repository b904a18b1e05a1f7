"""Per-input service time: how fast the batcher's queue drains, the basis of admission by estimated wait."""

from __future__ import annotations

import threading

SERVICE_TIME_SMOOTHING = 0.2  # weight of the newest batch in the per-input service time estimate
BACK_TO_BACK_S = 0.05  # a batch starting within this of the previous one's end means the worker had a backlog


class ServiceTime:
    """Smoothed worker seconds per input, 0 until the first batch. Each worker thread keeps its own clock."""

    def __init__(self) -> None:
        self.per_input_s = 0.0
        self._clock = threading.local()  # per worker thread: when its previous batch ended

    def record_batch(self, t_start_s: float, t_end_s: float, inputs: int) -> None:
        """Back to back with the previous batch, the whole cycle counts (batch assembly, GIL and CPU contention
        included): that is the rate the queue really drains at. After idle time only the compute does, and such
        a sample may lower the estimate but never raise it: a batch that found no backlog was small, and says
        nothing of how fast a queue would drain. So a slow period is forgotten as soon as the engine computes
        faster, and an idle engine never keeps refusing on an old figure."""
        t_prev_end_s = self.last_end_s()
        backlog = t_start_s - t_prev_end_s < BACK_TO_BACK_S
        cycle_s = t_end_s - t_prev_end_s if backlog else t_end_s - t_start_s
        self._clock.t_end_s = t_end_s
        sample_s = cycle_s / inputs
        if not self.per_input_s:
            self.per_input_s = sample_s
        elif backlog or sample_s < self.per_input_s:
            self.per_input_s += SERVICE_TIME_SMOOTHING * (sample_s - self.per_input_s)

    def record_stop(self, t_end_s: float) -> None:
        """A batch stopped part-way: its time is no sample of the service time, but the worker was busy."""
        self._clock.t_end_s = t_end_s

    def last_end_s(self) -> float:
        return float(getattr(self._clock, "t_end_s", 0.0))

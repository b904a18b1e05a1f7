"""When a request is shed: the one admission rule, shared by the in-process batcher and the front ends that
judge from the engine's published queue figures (service/engine_status.py).

A request is work once its body is in: it is judged on its own inputs, against the queue it would join. Batches
interleave requests (service/fair_queue.py), so the last of a new request's n inputs is computed after at most
n inputs of every request queued ahead of it (and all of a smaller one's): the wait is that work at the rate the
queue drains."""

from __future__ import annotations

from dataclasses import dataclass

from service.batch_errors import Overloaded, QueueFull
from service.metrics import ServiceMetrics


@dataclass(frozen=True)
class QueueFigures:
    """What admission reads of the engine's queue at one moment."""

    waiting_inputs: int  # inputs accepted and not yet in a batch
    queued_requests: int  # requests with inputs waiting
    per_input_s: float  # how fast the queue drains, per input and worker (0 until measured)
    workers: int  # inference workers draining the queue at once
    queue_size: int  # most inputs waiting


def estimated_wait_s(queue: QueueFigures, n_inputs: int = 1) -> float:
    """Seconds until the last of a new request's n_inputs is computed."""
    ahead_inputs = min(queue.waiting_inputs, queue.queued_requests * n_inputs)
    return (ahead_inputs + n_inputs) * queue.per_input_s / max(1, queue.workers)


class Admission:
    """Estimated wait, drain time and admission from `queue_figures()`: the one implementation behind the
    in-process batcher and a front end's link to the engine process."""

    admit_wait_share: float  # admit while the estimated wait <= this share of the request's deadline
    metrics: ServiceMetrics

    def queue_figures(self) -> QueueFigures:
        raise NotImplementedError

    def estimated_wait_s(self, n_inputs: int = 1) -> float:
        """How long a new request of n_inputs waits until its last input is computed."""
        return estimated_wait_s(self.queue_figures(), n_inputs)

    def drain_s(self) -> float:
        """How long the queued inputs take to compute: when a client refused for a full queue may retry."""
        queue = self.queue_figures()
        return queue.waiting_inputs * queue.per_input_s / max(1, queue.workers)

    def check_admission(self, n_inputs: int, deadline_ms: float, judged: bool = False) -> None:
        """QueueFull or Overloaded (counted in embedperf_shed_total) if a request of n_inputs is shed now."""
        self.judge(self.queue_figures(), n_inputs, deadline_ms, judged)

    def judge(self, queue: QueueFigures, n_inputs: int, deadline_ms: float, judged: bool = False) -> None:
        """The rule, on `queue`. `judged`: the request was admitted on its estimated wait already (by a front
        end, or before its inputs were counted); only the queue bound holds for it then, so a request let in
        is never turned into a late 429. An empty queue always admits: there is nobody to yield to."""
        waiting = queue.waiting_inputs
        if waiting + n_inputs > queue.queue_size:
            self.metrics.shed.labels(reason="queue_full").inc()
            raise QueueFull(waiting, queue.queue_size)
        if judged or not waiting:
            return
        wait_s = estimated_wait_s(queue, n_inputs)
        limit_s = deadline_ms / 1000 * self.admit_wait_share
        if wait_s > limit_s:
            self.metrics.shed.labels(reason="estimated_wait").inc()
            raise Overloaded(wait_s, limit_s)

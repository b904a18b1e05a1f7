"""Dynamic batcher: bounded queue of tokenised inputs -> batches cut by size, tokens and wait -> one device worker.

The event loop only enqueues and awaits; tokenisation runs on a tokeniser thread (or, with overlap off, on the
worker between batches) and compute on the single worker thread, which resolves the asyncio futures with
loop.call_soon_threadsafe. Anything with `tokenize` and `embed_token_ids` can stand in for the model in tests.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from service.batch_errors import (
    BatcherError,
    BatcherStopped,
    ClientGone,
    ComputeFailed,
    DeadlineExceeded,
    InputTooLong,
    InvalidInput,
    Overloaded,
    QueueFull,
)
from service.busy_window import BUSY_WINDOW_S, BusyWindow
from service.degrade import DeviceHealth, is_out_of_memory
from service.encoder import ComputeStopped, Encoder
from service.hangups import HangupQueue, HangupSignal
from service.metrics import ServiceMetrics
from service.service_time import ServiceTime

log = logging.getLogger("service.batcher")
SORT_WINDOW_BATCHES = (
    2  # sorting looks at this many batches' worth of the oldest inputs (wider: more skipping, longer tails)
)
COMPUTE_NICE = 5  # niceness of the tokeniser and inference threads, relative to the event loop's 0
# A running batch whose callers have gone down to this share (or none) stops at its next layer; the inputs
# still wanted go back to the front of the queue and are recomputed in a smaller batch, sooner than the whole
# batch would have finished (on a hang-up storm at the end of a load, one live request kept 31 dead ones busy).
RESTART_LIVE_SHARE = 0.25


def yield_cpu_to_event_loop() -> None:
    """Lower the calling thread's CPU priority (Linux: nice is per thread, inherited by threads it starts, such
    as torch's intra-op pool). When the host is short of CPU, the event loop then still answers /health,
    /ready and 429s at once, instead of queueing behind compute. A no-op where not permitted."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), COMPUTE_NICE)


@dataclass(frozen=True)
class BatcherConfig:
    batching: bool = True
    max_batch_size: int = 32
    max_batch_tokens: int = 8192
    max_wait_ms: float = 5.0
    sort_by_length: bool = True
    overlap_tokenize: bool = True
    queue_size: int = 1024
    long_input: Literal["truncate", "reject"] = "truncate"
    admit_wait_share: float = 1.0  # admit while the estimated wait <= this share of the request's deadline
    workers: int = 1  # inference threads taking batches from the one queue (one per serving device)


@dataclass
class BatchResult:
    """Embeddings of one request plus where its time went.

    batch_size / batch_tokens describe the largest batch the request rode in (a request with many inputs can be
    spread over several batches); batch_tokens counts padded tokens (inputs x longest), what the device computed.
    """

    embeddings: np.ndarray
    token_counts: list[int]
    queue_ms: float
    tokenize_ms: float
    compute_ms: float
    batch_size: int
    batch_tokens: int


@dataclass(eq=False)
class _Job:
    texts: list[str]
    future: asyncio.Future[BatchResult | None]  # None: the client hung up (ClientGone)
    loop: asyncio.AbstractEventLoop
    deadline_s: float
    deadline_ms: float
    t_submit_s: float = field(default_factory=time.perf_counter)
    t_tok_start_s: float = 0.0
    t_tok_end_s: float = 0.0
    token_counts: list[int] = field(default_factory=list)
    results: np.ndarray | None = None
    remaining: int = 0
    compute_s: float = 0.0
    batch_size: int = 0
    batch_tokens: int = 0
    counted: int = 0  # inputs of this job still counted in the queue depth (not yet batched or dropped)
    finished: bool = False  # set by the worker/tokeniser once the future has been (or is being) resolved
    cancelled: bool = False  # set by the event loop when the caller gave up
    hangup: HangupSignal | None = None  # its connection's: lost before the abandonment runs on the loop

    def given_up(self) -> bool:
        """The caller gave up: abandoned, or its connection has dropped and the abandonment is on its way."""
        hangup = self.hangup  # read once: the event loop clears it when the wait ends
        return self.cancelled or (hangup is not None and hangup.lost)

    def unwanted(self) -> bool:
        """No input of it needs computing: answered (or being answered), or its caller gave up."""
        return self.finished or self.given_up()


@dataclass(eq=False)
class _Item:
    job: _Job
    index: int
    ids: list[int]
    seq: int
    t_enqueued_s: float

    @property
    def length(self) -> int:
        return len(self.ids)


class Batcher:
    """Queue + batching workers (config.workers, one per serving device). start() before submitting; stop() drains."""

    def __init__(
        self,
        encoder: Encoder,
        config: BatcherConfig,
        metrics: ServiceMetrics | None = None,
        on_worker_start: Callable[[int], None] | None = None,
    ) -> None:
        self.encoder = encoder
        self.on_worker_start = on_worker_start  # runs first in worker thread i (e.g. binds its device)
        self.config = config
        self.metrics = metrics or ServiceMetrics()
        self._cond = threading.Condition()
        self._tok_jobs: collections.deque[_Job] = collections.deque()
        self._pending: list[_Item] = []
        self._waiting = 0  # inputs accepted and not yet in a batch (the queue depth)
        self._tokenizing = 0
        self._awaiting_more = 0  # workers waiting (up to max_wait_ms) for inputs still being tokenised
        self._stopping = False
        self._seq = itertools.count()
        self._busy = BusyWindow(lanes=config.workers)
        self.health = DeviceHealth(config.max_batch_size)
        self._service_time = ServiceTime()
        self.metrics.batch_limit.set(config.max_batch_size)
        self._threads: list[threading.Thread] = []
        self._results_lock = threading.Lock()
        self._hangups = HangupQueue()  # wakes the handlers of hung-up requests, a few per turn

    # ---- public API ----------------------------------------------------------------------------------------

    def start(self) -> None:
        workers = self.config.workers
        names = [f"embed-worker-{i}" for i in range(workers)] if workers > 1 else ["embed-worker"]
        self._threads = [
            threading.Thread(target=self._worker_loop, args=(i,), name=name, daemon=True)
            for i, name in enumerate(names)
        ]
        if self.config.overlap_tokenize:
            self._threads.append(
                threading.Thread(target=self._tokenizer_loop, name="embed-tokenizer", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Refuse new work, finish everything accepted, then end the threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=timeout_s)

    @property
    def queue_depth(self) -> int:
        return self._waiting

    def busy_fraction(self, window_s: float = BUSY_WINDOW_S) -> float:
        """Share of the last window_s the workers spent computing, averaged over workers (any device)."""
        return self._busy.fraction(window_s)

    def estimated_wait_s(self, extra_inputs: int = 0) -> float:
        """Queue wait a request of extra_inputs would see: inputs ahead of it x recent per-input compute time."""
        return (self._waiting + extra_inputs) * self._service_time.per_input_s / max(1, self.config.workers)

    def check_admission(
        self, n_inputs: int, deadline_ms: float, ahead_inputs: int = 0, judged_inputs: int = 0
    ) -> None:
        """Raise QueueFull or Overloaded when n_inputs should be shed now. submit() calls it under the lock;
        the app also calls it before reading a body, so shedding costs no body read or parse, counting as
        `ahead_inputs` the requests already admitted at the door but not yet queued here.

        A request whose inputs were all judged on the estimated wait at the door (`judged_inputs`) is not
        judged on it again: between the door and its turn here the estimate moves (the first batches of a
        burst run slower), and a second verdict turned requests already let in into 429s a few hundred
        milliseconds late, where the door answers in a few. The deadline still bounds their wait."""
        waiting = self._waiting + ahead_inputs
        if waiting + n_inputs > self.config.queue_size:
            self.metrics.shed.labels(reason="queue_full").inc()
            raise QueueFull(waiting, self.config.queue_size)
        if n_inputs <= judged_inputs:
            return
        wait_s = self.estimated_wait_s(ahead_inputs + n_inputs)
        limit_s = deadline_ms / 1000 * self.config.admit_wait_share
        if waiting and wait_s > limit_s:  # an empty queue always admits: there is no one to yield to
            self.metrics.shed.labels(reason="estimated_wait").inc()
            raise Overloaded(wait_s, limit_s)

    async def submit(
        self,
        texts: list[str],
        deadline_ms: float,
        hangup: HangupSignal | None = None,
        judged_inputs: int = 0,
    ) -> BatchResult:
        """Embed texts; raises Overloaded, QueueFull, DeadlineExceeded, InputTooLong, InvalidInput,
        BatcherStopped, ComputeFailed or ClientGone. A cancelled caller abandons its queued work. So does a
        hangup: the workers skip the work as soon as it is marked lost, and its callback (on the event loop)
        frees the queue space and ends the wait with ClientGone.
        judged_inputs: how many inputs the service's door already admitted on the estimated wait
        (`check_admission`)."""
        loop = asyncio.get_running_loop()
        job = _Job(
            texts=texts,
            future=loop.create_future(),
            loop=loop,
            deadline_s=time.perf_counter() + deadline_ms / 1000,
            deadline_ms=deadline_ms,
            counted=len(texts),
            hangup=hangup,
        )
        with self._cond:
            if self._stopping:
                raise BatcherStopped()
            self.check_admission(len(texts), deadline_ms, judged_inputs=judged_inputs)
            self._waiting += len(texts)
            self._tok_jobs.append(job)
            self._cond.notify_all()
        self.metrics.queue_depth.set(self._waiting)
        if hangup is not None:
            hangup.on_mark(lambda: self._release_queue_space(job))
            hangup.subscribe(lambda: self._abandon(job, "disconnected"))
        try:
            result = await asyncio.wait_for(asyncio.shield(job.future), timeout=deadline_ms / 1000)
        except TimeoutError:
            self._abandon(job, "deadline")
            raise DeadlineExceeded(deadline_ms) from None
        except asyncio.CancelledError:
            self._abandon(job, "cancelled")
            raise
        finally:  # the signal holds the job through its callback: no cycle for the garbage collector
            job.hangup = None
        if result is None:  # raised here, not kept in the future: see service/hangups.py
            raise ClientGone()
        return result

    def _release_queue_space(self, job: _Job) -> None:
        """The caller's connection dropped: its queued inputs stop counting now, before its abandonment runs
        (a slice of hang-ups at a time), so the estimated wait the next request is admitted on leaves them out."""
        with self._cond:
            if job.counted:
                self._uncount(job, job.counted)
                if self._awaiting_more:
                    self._cond.notify_all()

    def _abandon(self, job: _Job, reason: str) -> None:
        """The caller gave up: its queued inputs stop counting now, so they hold no queue space, and they are
        skipped wherever they are (tokeniser queue, pending list, a running batch). Constant time: a burst
        of disconnections must not walk the queue once per request while holding the workers' lock."""
        with self._cond:
            if job.cancelled or (job.finished and (job.future.done() or not job.given_up())):
                return  # abandoned already, or answered before its caller gave up
            job.cancelled = True
            job.finished = True
            if job.counted:
                self._uncount(job, job.counted)
                # Only a worker waiting for inputs still coming cares. Waking the idle threads too, at the end
                # of a load (~500 hang-ups at once), cost the event loop ~4 ms of thread switches.
                if self._awaiting_more:
                    self._cond.notify_all()
        self.metrics.abandoned.labels(reason=reason).inc()
        if reason == "disconnected" and not job.future.done():  # the caller still waits: end its wait soon
            self._hangups.end(job.future, None)

    # ---- resolving futures from worker threads -------------------------------------------------------------

    def _resolve(self, job: _Job, result: BatchResult | None, error: BaseException | None) -> None:
        job.finished = True

        def deliver() -> None:
            if job.future.done() or job.given_up():  # a hung-up caller's wait is ended by _abandon
                return
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(result)

        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            job.loop.call_soon_threadsafe(deliver)

    def _uncount(self, job: _Job, count: int) -> None:
        """Called with the lock held: count of job's inputs left the queue (those of an abandoned job already
        have, so this is a no-op for them)."""
        count = min(count, job.counted)
        job.counted -= count
        self._waiting -= count
        self.metrics.queue_depth.set(self._waiting)

    # ---- tokenisation --------------------------------------------------------------------------------------

    def _tokenizer_loop(self) -> None:
        yield_cpu_to_event_loop()
        while True:
            with self._cond:
                while not self._tok_jobs and not self._stopping:
                    self._cond.wait()
                if not self._tok_jobs:
                    return
                jobs = list(self._tok_jobs)
                self._tok_jobs.clear()
                self._tokenizing += 1
            try:
                self._tokenize_jobs(jobs)
            finally:
                with self._cond:
                    self._tokenizing -= 1
                    self._cond.notify_all()

    def _tokenize_jobs(self, jobs: list[_Job]) -> None:
        """Tokenise several requests in one tokenizer call, then queue their inputs for batching."""
        t_start_s = time.perf_counter()
        live: list[_Job] = []
        for job in jobs:
            job.t_tok_start_s = t_start_s
            if job.given_up() or t_start_s > job.deadline_s:
                self._fail_unqueued(job, DeadlineExceeded(job.deadline_ms))
            else:
                live.append(job)
        if not live:
            return
        max_tokens = self.encoder.max_tokens
        limit = max_tokens if self.config.long_input == "truncate" else max_tokens + 1
        try:
            all_ids = self.encoder.tokenize([text for job in live for text in job.texts], limit)
        except Exception:  # one request's bad text must fail only that request: retry them one by one
            all_ids = []
            survivors = []
            for job in live:
                try:
                    all_ids += self.encoder.tokenize(job.texts, limit)
                    survivors.append(job)
                except Exception as exc:
                    log.warning("tokenisation of one request failed: %s", exc)
                    error = InvalidInput(f"the tokeniser could not process the input: {exc}")
                    self._fail_unqueued(job, error)
            live = survivors
        t_end_s = time.perf_counter()
        offset = 0
        items: list[_Item] = []
        for job in live:
            ids = all_ids[offset : offset + len(job.texts)]
            offset += len(job.texts)
            job.t_tok_end_s = t_end_s
            too_long = next((i for i, row in enumerate(ids) if len(row) > max_tokens), None)
            if too_long is not None:
                self._fail_unqueued(job, InputTooLong(too_long, max_tokens))
                continue
            job.token_counts = [len(row) for row in ids]
            job.remaining = len(ids)
            items += [_Item(job, i, row, next(self._seq), t_end_s) for i, row in enumerate(ids)]
        with self._cond:  # a caller that gave up meanwhile is dropped here, under the same lock as _abandon
            items = [item for item in items if not item.job.given_up()]
            self._pending.extend(items)
            self._cond.notify_all()

    def _fail_unqueued(self, job: _Job, error: BatcherError) -> None:
        with self._cond:
            self._uncount(job, len(job.texts))
        self._resolve(job, None, error)

    # ---- batching ------------------------------------------------------------------------------------------

    def _purge_expired(self, now_s: float) -> None:
        """With the lock held: drop queued inputs of requests abandoned or past their deadline."""
        dead = [item for item in self._pending if item.job.given_up() or now_s > item.job.deadline_s]
        if not dead:
            return
        dead_ids = {id(item) for item in dead}
        self._pending = [item for item in self._pending if id(item) not in dead_ids]
        for item in dead:
            self._uncount(item.job, 1)
            if not item.job.unwanted():  # a hung-up caller's wait is ended by _abandon
                self._resolve(item.job, None, DeadlineExceeded(item.job.deadline_ms))

    def _select(self) -> list[_Item]:
        """Choose the next batch from the pending inputs; it always contains the oldest one (no starvation)."""
        cfg = self.config
        oldest = self._pending[0]
        if not cfg.batching:
            candidates = [item for item in self._pending if item.job is oldest.job]
        elif cfg.sort_by_length:
            window = self._pending[: cfg.max_batch_size * SORT_WINDOW_BATCHES]
            candidates = sorted(window, key=lambda item: (abs(item.length - oldest.length), item.seq))
        else:
            candidates = self._pending
        chosen: list[_Item] = []
        longest = 0
        batch_limit = self.health.batch_limit()
        for item in candidates:
            if len(chosen) >= batch_limit:
                break
            new_longest = max(longest, item.length)
            if chosen and new_longest * (len(chosen) + 1) > cfg.max_batch_tokens:
                if cfg.sort_by_length and cfg.batching:
                    continue  # a shorter input further on may still fit
                break
            chosen.append(item)
            longest = new_longest
        return chosen

    def _next_batch(self) -> list[_Item] | list[_Job] | None:
        """Block until there is a batch to compute (list of items), jobs to tokenise (list of jobs), or the end."""
        with self._cond:
            while True:
                if not self.config.overlap_tokenize and self._tok_jobs:
                    jobs = list(self._tok_jobs)
                    self._tok_jobs.clear()
                    return jobs
                now_s = time.perf_counter()
                self._purge_expired(now_s)
                if self._pending:
                    chosen = self._select()
                    full = len(chosen) < len(self._pending) or len(chosen) >= self.health.batch_limit()
                    wait_s = self._pending[0].t_enqueued_s + self.config.max_wait_ms / 1000 - now_s
                    # Wait only for inputs already accepted and still being tokenised: waiting for arrivals
                    # that may never come only adds latency (a lone client would pay max_wait on every call).
                    more_coming = self._waiting > len(self._pending)
                    if not self.config.batching or full or wait_s <= 0 or not more_coming or self._stopping:
                        chosen_ids = {id(item) for item in chosen}
                        self._pending = [item for item in self._pending if id(item) not in chosen_ids]
                        for item in chosen:
                            self._uncount(item.job, 1)
                        return chosen
                    self._awaiting_more += 1
                    try:
                        self._cond.wait(timeout=wait_s)
                    finally:
                        self._awaiting_more -= 1
                elif self._stopping and not self._tok_jobs and not self._tokenizing:
                    return None
                else:
                    self._cond.wait(timeout=1.0)

    def _worker_loop(self, worker_index: int = 0) -> None:
        yield_cpu_to_event_loop()
        if self.on_worker_start is not None:
            self.on_worker_start(worker_index)
        while True:
            work = self._next_batch()
            if work is None:
                return
            if work and isinstance(work[0], _Job):
                self._tokenize_jobs(work)
            elif work:
                self._compute(work)  # type: ignore[arg-type]

    def _compute(self, batch: list[_Item]) -> None:
        batch = [item for item in batch if not item.job.unwanted()]  # callers that gave up cost nothing
        if not batch:
            return
        if self.config.sort_by_length:
            batch.sort(key=lambda item: item.length)
        longest = max(item.length for item in batch)
        padded_tokens = longest * len(batch)
        t_start_s = time.perf_counter()
        try:
            vectors = self.encoder.embed_token_ids(
                [item.ids for item in batch], should_stop=lambda: self._not_worth_finishing(batch)
            )
        except ComputeStopped:  # (nearly) every caller went away meanwhile: free the worker, requeue the rest
            self._stopped(batch, t_start_s)
            return
        except Exception as exc:  # one bad batch fails its requests, never the worker
            self._device_error(batch, exc)
            return
        t_end_s = time.perf_counter()
        compute_s = t_end_s - t_start_s
        self._service_time.record_batch(t_start_s, t_end_s, len(batch))
        m = self.metrics
        m.batch_limit.set(self.health.batch_limit())
        m.estimated_wait.set(self.estimated_wait_s())
        m.compute_seconds.inc(compute_s / self.config.workers)  # its rate stays a 0..1 busy fraction
        m.batch_size.observe(len(batch))
        m.batch_tokens.observe(padded_tokens)
        m.inputs.inc(len(batch))
        m.tokens.inc(sum(item.length for item in batch))
        self._busy.record(t_end_s, compute_s)
        with self._results_lock:  # with several workers, one request's inputs can finish on two threads
            jobs: dict[int, _Job] = {}
            for item, vector in zip(batch, vectors, strict=True):
                job = item.job
                if job.unwanted():
                    continue
                if job.results is None:
                    job.results = np.empty((len(job.texts), vectors.shape[1]), dtype=np.float32)
                job.results[item.index] = vector
                job.remaining -= 1
                jobs[id(job)] = job
            for job in jobs.values():
                job.compute_s += compute_s
                if len(batch) > job.batch_size:
                    job.batch_size, job.batch_tokens = len(batch), padded_tokens
                if job.remaining == 0 and job.results is not None:
                    tokenize_s = job.t_tok_end_s - job.t_tok_start_s
                    queue_s = max(0.0, (t_end_s - job.t_submit_s) - tokenize_s - job.compute_s)
                    result = BatchResult(
                        embeddings=job.results,
                        token_counts=job.token_counts,
                        queue_ms=queue_s * 1000,
                        tokenize_ms=tokenize_s * 1000,
                        compute_ms=job.compute_s * 1000,
                        batch_size=job.batch_size,
                        batch_tokens=job.batch_tokens,
                    )
                    self._resolve(job, result, None)

    @staticmethod
    def _not_worth_finishing(batch: list[_Item]) -> bool:
        live = sum(1 for item in batch if not item.job.unwanted())
        return live <= len(batch) * RESTART_LIVE_SHARE

    def _stopped(self, batch: list[_Item], t_start_s: float) -> None:
        """A batch stopped part-way: its inputs still wanted go back to the front of the queue (in their order);
        its time counts as busy, but not towards the per-input service time."""
        t_end_s = time.perf_counter()
        self._service_time.record_stop(t_end_s)
        self.metrics.stopped_batches.inc()
        self.metrics.compute_seconds.inc((t_end_s - t_start_s) / self.config.workers)
        self._busy.record(t_end_s, t_end_s - t_start_s)
        with self._cond:
            live = sorted((item for item in batch if not item.job.unwanted()), key=lambda item: item.seq)
            for item in live:
                item.job.counted += 1
            self._waiting += len(live)
            self._pending[:0] = live
            self.metrics.queue_depth.set(self._waiting)
            self._cond.notify_all()
        log.debug(
            "stopped a batch of %d inputs after %.1f ms: its callers had gone; %d input(s) requeued",
            len(batch),
            (t_end_s - t_start_s) * 1000,
            len(live),
        )

    def _device_error(self, batch: list[_Item], exc: Exception) -> None:
        """Out of memory: split the batch and retry the halves (and keep batches small for a while).
        Any other error, or OOM on a single input, fails only this batch's requests and counts towards /ready."""
        if is_out_of_memory(exc) and len(batch) > 1:
            log.warning("batch of %d inputs ran out of device memory; retrying it in halves", len(batch))
            self.health.record_oom(len(batch))
            self.metrics.oom_splits.inc()
            self.metrics.batch_limit.set(self.health.batch_limit())
            half = len(batch) // 2
            self._compute(batch[:half])
            self._compute(batch[half:])
            return
        if is_out_of_memory(exc):
            self.health.record_oom(1)
        else:
            self.health.record_error()
        self.metrics.device_errors.inc()
        log.error("batch of %d inputs failed: %s: %s", len(batch), type(exc).__name__, exc)
        self._fail_batch(batch, ComputeFailed(f"inference failed: {type(exc).__name__}: {exc}"))

    def _fail_batch(self, batch: list[_Item], error: BatcherError) -> None:
        failed = {id(item.job): item.job for item in batch if not item.job.finished}
        with self._cond:
            rest = [item for item in self._pending if id(item.job) in failed]
            if rest:
                self._pending = [item for item in self._pending if id(item.job) not in failed]
                for item in rest:
                    self._uncount(item.job, 1)
        for job in failed.values():
            self._resolve(job, None, error)

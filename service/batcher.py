"""Dynamic batcher: bounded queue of tokenised inputs -> fair batches cut by size, tokens and wait -> device workers.

The event loop only enqueues and awaits; tokenisation runs on a tokeniser thread (or, with overlap off, on a
worker between batches) and compute on the worker threads, which resolve the asyncio futures with
loop.call_soon_threadsafe. Large requests are tokenised a slice at a time and their inputs interleaved with
other requests' (service/fair_queue.py), so no request waits for the whole of another. Anything with
`tokenize` and `embed_token_ids` can stand in for the model in tests (modelcore/encoder.py)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from modelcore.encoder import ComputeStopped, Encoder
from service.admission_rule import Admission, QueueFigures
from service.batch_errors import (
    BatcherError,
    BatcherStopped,
    ComputeFailed,
    DeadlineExceeded,
    Overloaded,
    QueueFull,
)
from service.batch_job import (
    CLIENT_DISCONNECTED,
    RESTART_LIVE_SHARE,
    SORT_WINDOW_BATCHES,
    TOKENIZE_SLICE,
    BatcherConfig,
    BatchJob,
    BatchResult,
    Claim,
    Work,
    yield_cpu_to_event_loop,
)
from service.busy_window import BUSY_WINDOW_S, BusyWindow, ServiceTime
from service.degrade import DeviceHealth, Fallback, FallbackSwitch, is_out_of_memory
from service.fair_queue import BatchLimits, FairQueue, Item
from service.metrics import ServiceMetrics
from service.tokenize_stage import Tokenized, tokenize_claims

log = logging.getLogger("service.batcher")


class Batcher(Admission):
    """Queue + batching workers (config.workers, one per serving device). start() before submitting; stop() drains."""

    def __init__(
        self,
        encoder: Encoder,
        config: BatcherConfig,
        metrics: ServiceMetrics | None = None,
        on_worker_start: Callable[[int], None] | None = None,
        fallback: Fallback | None = None,
    ) -> None:
        self.config = config
        self.admit_wait_share = config.admit_wait_share
        self.metrics = metrics or ServiceMetrics()
        self.on_worker_start = on_worker_start  # runs first in worker thread i (e.g. binds its device)
        self.encoders: dict[str, Encoder] = {config.model_id: encoder}
        horizon_s = max(BUSY_WINDOW_S, fallback.window_s if fallback else 0.0)
        self._busy = BusyWindow(lanes=config.workers, horizon_s=horizon_s)
        self.switch: FallbackSwitch | None = None
        if fallback is not None:
            self.encoders[fallback.model_id] = fallback.encoder
            self.switch = FallbackSwitch(config.model_id, fallback, self._busy.fraction)
        self._cond = threading.Condition()
        self._first_idle = False  # the first worker is free for work (with first_worker_first)
        self._tok_jobs: collections.deque[BatchJob] = collections.deque()
        self._queue: FairQueue[BatchJob] = FairQueue()
        # jobs with inputs counted in the queue depth, oldest first
        self._queued_jobs: dict[BatchJob, None] = {}
        self._waiting = 0  # inputs accepted and not yet in a batch (the queue depth)
        self._tokenizing = 0
        self._awaiting_more = 0  # workers waiting (up to max_wait_ms) for inputs still being tokenised
        self._computing = 0  # workers computing a batch
        self._stopping = False
        self._seq = itertools.count()
        self.health = DeviceHealth(config.max_batch_size)
        self._service_time = ServiceTime()
        self.metrics.batch_limit.set(config.max_batch_size)
        self._threads: list[threading.Thread] = []
        self._results_lock = threading.Lock()
        self._tokenizer_lock = threading.Lock()

    # ---- public API ----------------------------------------------------------------------------------------

    def start(self) -> None:
        workers = self.config.workers
        names = [f"embed-worker-{i}" for i in range(workers)] if workers > 1 else ["embed-worker"]
        self._threads = [
            threading.Thread(target=self._worker_loop, args=(i,), name=name, daemon=True)
            for i, name in enumerate(names)
        ]
        if self.config.overlap_tokenize:
            tokenizer = threading.Thread(target=self._tokenizer_loop, name="embed-tokenizer", daemon=True)
            self._threads.append(tokenizer)
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Refuse new work, finish everything accepted (within timeout_s per thread), then end the threads."""
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

    def queue_figures(self) -> QueueFigures:
        """The queue as admission reads it; front ends read the same figures from the engine's status."""
        return QueueFigures(
            waiting_inputs=self._waiting,
            queued_requests=len(self._queued_jobs),
            per_input_s=self._service_time.per_input_s,
            workers=self.config.workers,
            queue_size=self.config.queue_size,
        )

    def model_for_new_request(self) -> str:
        """The id of the model that would compute a request submitted now (the fallback while busy)."""
        return self.switch.model_for_new_request() if self.switch else self.config.model_id

    def serving_fallback(self) -> bool:
        return bool(self.switch and self.switch.on_fallback)

    async def submit(
        self, texts: list[str], deadline_ms: float, judged: bool = False, model: str | None = None
    ) -> BatchResult:
        """Embed texts with `model` (default: model_for_new_request()); raises Overloaded, QueueFull,
        DeadlineExceeded, InputTooLong, TooManyTokens, InvalidInput, BatcherStopped or ComputeFailed. A
        cancelled caller abandons its work wherever it is; cancelled with CLIENT_DISCONNECTED, it is counted
        as a hang-up. judged: admission already judged it on the estimated wait (`check_admission`)."""
        job = self.enqueue(texts, deadline_ms, judged, model)
        outcome: BatchResult | BatcherError | None = None
        try:
            outcome = await asyncio.wait_for(asyncio.shield(job.future), timeout=deadline_ms / 1000)
            if isinstance(outcome, BatcherError):
                raise outcome
            return outcome
        except TimeoutError:
            self.abandon(job, "deadline")
            raise DeadlineExceeded(deadline_ms) from None
        except asyncio.CancelledError as exc:
            self.abandon(job, CLIENT_DISCONNECTED if CLIENT_DISCONNECTED in exc.args else "cancelled")
            raise
        finally:  # a raised error's traceback holds this frame: it must not hold the error (or the job) too
            del job, outcome

    def enqueue(
        self,
        texts: list[str],
        deadline_ms: float,
        judged: bool = False,
        model: str | None = None,
        token_ids: list[list[int]] | None = None,
    ) -> BatchJob:
        """Queue a request without waiting for it (on the event loop's thread): its job's future resolves to
        the BatchResult or the BatcherError. Raises what refuses it at once (admission, limits, stopping). The
        caller abandons it (`abandon`) when it gives up; work past its deadline is dropped before compute.
        token_ids: the request came tokenised (by a front end, with the model's own tokeniser and limit): its
        inputs go straight to the queue, and `texts` may be empty."""
        loop = asyncio.get_running_loop()
        model = model or self.model_for_new_request()
        size = len(token_ids) if token_ids is not None else len(texts)
        job = BatchJob(
            texts=texts,
            size=size,
            future=loop.create_future(),
            deadline_s=time.perf_counter() + deadline_ms / 1000,
            deadline_ms=deadline_ms,
            model=model,
            token_counts=[0] * size,
            remaining=size,
            counted=size,
        )
        items = self._tokenized_items(job, token_ids) if token_ids is not None else None
        with self._cond:
            if self._stopping:
                raise BatcherStopped()
            # Texts are judged on the estimated wait once their first slice is tokenised (`_judge_tokenized`):
            # a request over the token budget is answered 413 whatever the load, never 429.
            self.check_admission(size, deadline_ms, judged=judged or items is None)
            job.unjudged = not judged and items is None
            job.seq = next(self._seq)
            self._waiting += size
            self._queued_jobs[job] = None
            if items is None:
                self._tok_jobs.append(job)
            else:
                self._queue.add(items)
            self._cond.notify_all()
        self.metrics.queue_depth.set(self._waiting)
        return job

    def _tokenized_items(self, job: BatchJob, token_ids: list[list[int]]) -> list[Item[BatchJob]]:
        """Queue items of a request that came tokenised, after the checks tokenising would have made."""
        now_s = time.perf_counter()
        tokenized = Tokenized(token_ids, [(job, 0, job.size)], [], now_s, now_s)
        items, failures = tokenized.items(self.encoders[job.model].max_tokens, self.config.max_request_tokens)
        if failures:
            raise failures[0][1]
        job.claimed = job.size
        return items

    def abandon(self, job: BatchJob, reason: str) -> None:
        """The caller gave up: its inputs stop counting and leave the queue now; any of them in a running batch
        are skipped (and the batch stopped when few of its callers are left)."""
        with self._cond:
            if job.cancelled or job.finished:
                return  # abandoned already, or answered before its caller gave up
            job.cancelled = True
            self._unqueue(job)
            if self._awaiting_more:  # only a worker waiting for inputs still coming cares
                self._cond.notify_all()
        self.metrics.abandoned.labels(reason=reason).inc()

    # ---- resolving futures from worker threads -------------------------------------------------------------

    def _resolve(self, job: BatchJob, result: BatchResult | None, error: BatcherError | None) -> None:
        """Answer job on its event loop; an error is the future's result, raised by submit() (as the future's
        exception, its traceback made a cycle with asyncio's frames that kept the request's texts alive)."""
        job.finished = True

        def deliver() -> None:
            if not (job.future.done() or job.cancelled):
                job.future.set_result(error if error is not None else result)  # type: ignore[arg-type]

        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            job.future.get_loop().call_soon_threadsafe(deliver)

    def _unqueue(self, job: BatchJob, error: BatcherError | None = None) -> None:
        """With the lock held: job's inputs leave the queue (a running batch skips them); error answers it."""
        self._queue.drop_job(job)
        self._uncount(job, job.counted)
        if error is not None:
            self._resolve(job, None, error)

    def _uncount(self, job: BatchJob, count: int) -> None:
        """With the lock held: `count` of job's inputs left the queue (a no-op for those already uncounted)."""
        count = min(count, job.counted)
        job.counted -= count
        self._waiting -= count
        if not job.counted:
            self._queued_jobs.pop(job, None)
        self.metrics.queue_depth.set(self._waiting)

    def _fail(self, job: BatchJob, error: BatcherError) -> None:
        """Answer job with error, unless it is unwanted already."""
        with self._cond:
            if not job.unwanted():
                self._unqueue(job, error)

    # ---- tokenisation --------------------------------------------------------------------------------------

    def _claim(self) -> list[Claim]:
        """With the lock held: the next tokeniser call's slices (oldest first), counted in _tokenizing."""
        self._tokenizing += 1
        claims = []
        for _ in range(len(self._tok_jobs)):
            job = self._tok_jobs.popleft()
            if job.unwanted():
                continue
            start, end = job.claimed, min(len(job.texts), job.claimed + TOKENIZE_SLICE)
            job.claimed = end
            claims.append((job, start, end))
            if end < len(job.texts):
                self._tok_jobs.append(job)
        return claims

    def _tokenizer_loop(self) -> None:
        if self.config.yield_to_event_loop:
            yield_cpu_to_event_loop()
        while True:
            with self._cond:
                while not self._tok_jobs and not self._stopping:
                    self._cond.wait()
                if not self._tok_jobs:
                    return
                claims = self._claim()
            self._tokenize(claims)

    def _tokenize(self, claims: list[Claim]) -> None:
        """Tokenise the claimed slices of several requests, one tokeniser call per model, and queue them."""
        t_start_s = time.perf_counter()
        items: list[Item[BatchJob]] = []
        try:
            by_model: dict[str, list[Claim]] = {}
            for claim in claims:
                job = claim[0]
                if job.unwanted():
                    continue
                if t_start_s > job.deadline_s:
                    self._fail(job, DeadlineExceeded(job.deadline_ms))
                else:
                    by_model.setdefault(job.model, []).append(claim)
            for model, group in by_model.items():
                items += self._tokenize_group(self.encoders[model], group)
        finally:
            with self._cond:  # a caller that gave up meanwhile is dropped here, under abandon's lock
                self._tokenizing -= 1
                for job in jobs_of(items):
                    if job.unjudged:
                        self._judge_tokenized(job)
                self._queue.add([item for item in items if not item.job.unwanted()])
                self._cond.notify_all()

    def _judge_tokenized(self, job: BatchJob) -> None:
        """With the lock held: admission of a request whose first slice is tokenised (within its limits), on the
        wait the work queued ahead of it and its own inputs would take; refused, it leaves the queue (429)."""
        job.unjudged = False
        ahead = self.queue_figures()
        others = dataclasses.replace(
            ahead,
            waiting_inputs=ahead.waiting_inputs - job.counted,
            queued_requests=max(0, ahead.queued_requests - 1),
        )
        try:
            self.judge(others, job.size, job.deadline_ms)
        except (QueueFull, Overloaded) as exc:
            self._unqueue(job, exc)

    def _tokenize_group(self, encoder: Encoder, claims: list[Claim]) -> list[Item[BatchJob]]:
        limit = encoder.max_tokens if self.config.long_input == "truncate" else encoder.max_tokens + 1
        with self._tokenizer_lock:  # fast tokenisers keep per-call state on the object: one call at a time
            tokenized = tokenize_claims(encoder, claims, limit)
        items, failures = tokenized.items(encoder.max_tokens, self.config.max_request_tokens)
        for job, error in failures:
            self._fail(job, error)
        return items

    # ---- batching ------------------------------------------------------------------------------------------

    def _purge_expired(self, now_s: float) -> None:
        """With the lock held: drop queued inputs of requests abandoned, answered or past their deadline."""
        dropped = self._queue.drop(lambda job: job.unwanted() or now_s > job.deadline_s)
        for item in dropped:
            self._uncount(item.job, 1)
        for job in jobs_of(dropped):
            if not job.unwanted():  # expired: its inputs not yet tokenised stop counting too
                self._unqueue(job, DeadlineExceeded(job.deadline_ms))

    def _limits(self) -> BatchLimits:
        cfg = self.config
        return BatchLimits(
            max_inputs=self.health.batch_limit(),
            max_tokens=cfg.max_batch_tokens,
            sort_by_length=cfg.sort_by_length,
            batching=cfg.batching,
            sort_window=cfg.max_batch_size * SORT_WINDOW_BATCHES,
        )

    def _next_work(self, first: bool = False) -> Work | None:
        """Block until there is a batch to compute, slices to tokenise (overlap off), or the end (None)."""
        with self._cond:
            if first:
                self._first_idle = True
            while True:
                if not first and self._first_idle and len(self._queue):
                    self._cond.wait(timeout=1.0)  # the first worker is free: the batch is its to take
                    continue
                if not self.config.overlap_tokenize and self._tok_jobs:
                    return "tokenize", self._claim()
                now_s = time.perf_counter()
                self._purge_expired(now_s)
                if len(self._queue):
                    full = len(self._queue) >= self.health.batch_limit()
                    wait_s = self._queue.oldest().t_enqueued_s + self.config.max_wait_ms / 1000 - now_s
                    # Wait for inputs accepted and still being tokenised, or for arrivals while another batch
                    # computes (closed-loop clients answered by it come back): a lone client waits for nothing.
                    more_coming = self._waiting > len(self._queue) or self._computing > 0
                    if not self.config.batching or full or wait_s <= 0 or not more_coming or self._stopping:
                        chosen = self._queue.select(self._limits())
                        for item in chosen:
                            self._uncount(item.job, 1)
                        self._computing += 1
                        if first:  # what it leaves is for the others
                            self._first_idle = False
                            self._cond.notify_all()
                        return "compute", chosen
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
        if self.config.yield_to_event_loop:
            yield_cpu_to_event_loop()
        if self.on_worker_start is not None:
            self.on_worker_start(worker_index)
        first = worker_index == 0 and self.config.first_worker_first
        while True:
            work = self._next_work(first)
            if work is None:
                return
            if work[0] == "tokenize":
                self._tokenize(work[1])
            elif work[1]:
                self._compute(work[1], first)
            if work[0] == "compute":
                with self._cond:
                    self._computing -= 1

    def _compute(self, batch: list[Item[BatchJob]], first: bool = False) -> None:
        batch = [item for item in batch if not item.job.unwanted()]  # callers that gave up cost nothing
        if not batch:
            return
        if self.config.sort_by_length:
            batch.sort(key=lambda item: item.length)
        model = batch[0].job.model
        padded_tokens = max(item.length for item in batch) * len(batch)
        t_start_s = time.perf_counter()
        try:
            vectors = self.encoders[model].embed_token_ids(
                [item.ids for item in batch], should_stop=lambda: self._not_worth_finishing(batch)
            )
        except ComputeStopped:  # (nearly) every caller went away meanwhile: free the worker, requeue the rest
            self._stopped(batch, t_start_s)
            return
        except Exception as exc:  # one bad batch fails its requests, never the worker
            self._device_error(batch, exc)
            return
        if first:  # free again before its answers go out: the next request is its to take
            with self._cond:
                self._first_idle = True
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
        m.padded_tokens.inc(padded_tokens)
        self._busy.record(t_end_s, compute_s)
        with self._results_lock:  # with several workers, one request's inputs can finish on two threads
            self._store(batch, vectors, compute_s, padded_tokens, t_end_s)

    def _store(
        self, batch: list[Item[BatchJob]], vectors: np.ndarray, compute_s: float, padded: int, t_end_s: float
    ) -> None:
        """Put a computed batch's vectors in place; answer the requests it completed."""
        jobs: dict[int, BatchJob] = {}
        for item, vector in zip(batch, vectors, strict=True):
            job = item.job
            if job.unwanted():
                continue
            if job.results is None:
                job.results = np.empty((job.size, vectors.shape[1]), dtype=np.float32)
            job.results[item.index] = vector
            job.remaining -= 1
            jobs[id(job)] = job
        for job in jobs.values():
            job.compute_s += compute_s
            if len(batch) > job.batch_size:
                job.batch_size, job.batch_tokens = len(batch), padded
            if job.remaining == 0 and job.results is not None:
                queue_ms = max(0.0, (t_end_s - job.t_submit_s) - job.tokenize_s - job.compute_s) * 1000
                ms = (queue_ms, job.tokenize_s * 1000, job.compute_s * 1000)  # queue, tokenize, compute
                batches = (job.batch_size, job.batch_tokens)
                self._resolve(job, BatchResult(job.results, job.token_counts, *ms, *batches, job.model), None)

    @staticmethod
    def _not_worth_finishing(batch: list[Item[BatchJob]]) -> bool:
        live = sum(1 for item in batch if not item.job.unwanted())
        return live <= len(batch) * RESTART_LIVE_SHARE

    def _stopped(self, batch: list[Item[BatchJob]], t_start_s: float) -> None:
        """A batch stopped part-way: its inputs still wanted go back to the front of their requests' queues; its
        time counts as busy, but not towards the per-input service time."""
        t_end_s = time.perf_counter()
        self._service_time.record_stop(t_end_s)
        self.metrics.stopped_batches.inc()
        self.metrics.compute_seconds.inc((t_end_s - t_start_s) / self.config.workers)
        self._busy.record(t_end_s, t_end_s - t_start_s)
        with self._cond:
            live = [item for item in batch if not item.job.unwanted()]
            for item in live:
                item.job.counted += 1
                self._queued_jobs[item.job] = None
            self._waiting += len(live)
            self._queue.requeue(live)
            self.metrics.queue_depth.set(self._waiting)
            self._cond.notify_all()

    def _device_error(self, batch: list[Item[BatchJob]], exc: Exception) -> None:
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
        error = ComputeFailed(f"inference failed: {type(exc).__name__}: {exc}")
        for job in jobs_of(batch):
            self._fail(job, error)


def jobs_of(items: list[Item[BatchJob]]) -> list[BatchJob]:
    """The requests items belong to, each once, in the order of their first item."""
    return list({id(item.job): item.job for item in items}.values())

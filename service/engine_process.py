"""The engine process: the model and its batcher behind a ZeroMQ socket, with nothing else on its CPU.

Front ends send token ids (service/engine_wire.py); the engine queues them as one request each, batches them
across requests and answers each with its vectors. Its queue figures, health and model cards go to the status
block (service/engine_status.py) every PUBLISH_INTERVAL_S, where front ends read them for admission, /health
and /ready without asking. It stops when the supervisor asks (SIGTERM) or when the supervisor is gone."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import uvloop
import zmq

from embedperf.errors import EmbedperfError
from service.batch_errors import BatcherError
from service.batch_job import CLIENT_DISCONNECTED, BatchJob, BatchResult
from service.batcher import Batcher
from service.engine_status import QUEUE_SLOTS, EngineState, Slot, StatusBlock
from service.engine_wire import (
    CANCEL,
    SUBMIT,
    Reply,
    arrived,
    error_reply,
    open_socket,
    read_cancel,
    read_message,
    read_submission,
    reply_frames,
    result_reply,
)
from service.local_engine import LocalEngine
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings

log = logging.getLogger("service.engine")
ZERO_COPY_BYTES = 64 * 1024  # replies at least this large are sent without copying their vectors
PUBLISH_INTERVAL_S = 0.02  # how stale the queue figures front ends admit on may be
DOCUMENT_EVERY = 25  # publications between two rewrites of the status document (0.5 s)


def run_engine(settings: ServiceSettings, endpoint: str, status_path: str, generation: int) -> None:
    """The engine process's work, from service/engine_entry.py."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the supervisor decides
    settings.log_to_stderr(f"engine[{os.getpid()}] ")
    uvloop.run(EngineServer(settings, endpoint, Path(status_path), generation).serve())
    # Everything is answered and released; tearing down torch's thread pools and allocators at interpreter
    # exit would only make the supervisor (and an orchestrator's grace period) wait longer.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


class EngineServer:
    def __init__(self, settings: ServiceSettings, endpoint: str, status_path: Path, generation: int) -> None:
        self.settings = settings
        self.endpoint = endpoint
        self.status = StatusBlock.open(status_path)
        self.generation = generation
        self.metrics = ServiceMetrics()
        self.engine = LocalEngine(settings, None, self.metrics, own_process=True)
        self.jobs: dict[tuple[bytes, int], BatchJob] = {}  # (front end, request id) -> its job in the batcher
        self.outbox: dict[bytes, list[Reply]] = {}  # replies per front end, sent together at the end of a turn
        self.stop = asyncio.Event()
        self.parent_pid = os.getppid()
        self.counted_hits = self.counted_misses = 0

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stop.set)
        context = zmq.Context()
        socket = self.socket = open_socket(context, zmq.ROUTER)
        socket.bind(self.endpoint)
        self.status.set(Slot.GENERATION, self.generation)
        self.status.set(Slot.STATE, EngineState.STARTING)
        publisher = asyncio.create_task(self._publish_loop())
        try:
            await self.engine.start()
        except Exception as exc:  # an EmbedperfError (missing model, device runtime) says what to fix itself
            if not isinstance(exc, EmbedperfError):
                log.exception("the engine could not get ready")
            failure = str(exc) if isinstance(exc, EmbedperfError) else f"{type(exc).__name__}: {exc}"
            self.status.write_document({"failure": failure, "exit_code": getattr(exc, "exit_code", 3)})
            self.status.set(Slot.STATE, EngineState.FAILED)
        else:
            self._publish(document=True)
            self.status.set(Slot.STATE, EngineState.READY)
            log.info("engine ready: %s on %s", self.settings.model_name, self.settings.device)
            reader_fd = int(socket.getsockopt(zmq.FD))
            loop.add_reader(reader_fd, self._receive)
            self._receive()  # what arrived before the reader was registered
            await self.stop.wait()
            loop.remove_reader(reader_fd)
            log.info("engine stopping: %d request(s) left", len(self.jobs))
            batcher = self.engine.batcher
            assert batcher is not None
            for job in list(self.jobs.values()):  # the front ends have drained: nobody waits for what is left
                batcher.abandon(job, "cancelled")
            await self.engine.stop(self.settings.shutdown_grace_s)
            self.status.set(Slot.STATE, EngineState.STOPPED)
            log.info("engine stopped")
        publisher.cancel()
        context.destroy(linger=0)

    def _receive(self) -> None:
        """Queue every request that has arrived and drop every cancelled one; no task per request: a job's
        future answers its front end by callback."""
        batcher = self.engine.batcher
        assert batcher is not None
        for identity, frame in arrived(self.socket, copy=True):
            for message in read_message(frame):
                if message["kind"] == SUBMIT:
                    self._enqueue(batcher, identity, message)
                elif message["kind"] == CANCEL:
                    request_id, reason = read_cancel(message)
                    if (abandoned := self.jobs.pop((identity, request_id), None)) is not None:
                        reason = CLIENT_DISCONNECTED if reason == CLIENT_DISCONNECTED else "cancelled"
                        batcher.abandon(abandoned, reason)

    def _enqueue(self, batcher: Batcher, identity: bytes, message: dict[str, Any]) -> None:
        submission = read_submission(message)
        try:
            job = batcher.enqueue([], submission.deadline_ms, True, submission.model, submission.token_ids)
        except BatcherError as exc:
            self._reply(identity, error_reply(submission.request_id, exc))
            return
        key = (identity, submission.request_id)
        self.jobs[key] = job
        job.future.add_done_callback(partial(self._answer, key))

    def _answer(self, key: tuple[bytes, int], future: asyncio.Future[BatchResult | BatcherError]) -> None:
        if self.jobs.pop(key, None) is None or future.cancelled():  # abandoned: its front end gave up
            return
        identity, request_id = key
        outcome = future.result()
        if isinstance(outcome, BatcherError):
            self._reply(identity, error_reply(request_id, outcome))
        else:
            self._reply(identity, result_reply(request_id, outcome))

    def _reply(self, identity: bytes, reply: Reply) -> None:
        """Queue a reply: what this turn of the event loop answers (a batch's requests) goes to each front end
        as one message."""
        if not self.outbox:
            asyncio.get_running_loop().call_soon(self._send_replies)
        self.outbox.setdefault(identity, []).append(reply)

    def _send_replies(self) -> None:
        outbox, self.outbox = self.outbox, {}
        for identity, replies in outbox.items():
            frames = [identity, *reply_frames(replies)]
            # Copied sends: below tens of kilobytes a copy is cheaper than a zero-copy frame's bookkeeping.
            copy = sum(memoryview(frame).nbytes for frame in frames) < ZERO_COPY_BYTES
            with contextlib.suppress(zmq.Again):  # a front end that stopped reading: its requests are lost
                self.socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=copy)
        self._receive()  # any operation may consume the socket's readiness signal

    async def _publish_loop(self) -> None:
        count = 0
        while True:
            if os.getppid() != self.parent_pid:  # the supervisor is gone: nobody can reach this engine
                log.error("the supervisor process ended; the engine stops")
                self.stop.set()
            self._publish(document=count % DOCUMENT_EVERY == 0)
            count += 1
            await asyncio.sleep(PUBLISH_INTERVAL_S)

    def _publish(self, document: bool) -> None:
        status, batcher = self.status, self.engine.batcher
        status.set(Slot.HEARTBEAT_S, time.monotonic())
        if batcher is None:
            return
        for slot, value in zip(QUEUE_SLOTS, dataclasses.astuple(batcher.queue_figures()), strict=True):
            status.set(slot, value)
        status.set(Slot.BUSY_FRACTION, batcher.busy_fraction())
        status.set(Slot.HEALTHY, float(batcher.health.healthy()))
        status.set(Slot.RECENT_ERRORS, batcher.health.recent_errors())
        status.set(Slot.RETRY_AFTER_S, batcher.health.retry_after_s())
        status.set(Slot.FALLBACK_ON, float(batcher.model_for_new_request() != batcher.config.model_id))
        if document:
            self._count_buckets()
            busy = self.engine.device_busy_fractions()
            for device, fraction in busy.items():  # a function gauge cannot cross processes: set it
                self.metrics.device_busy.labels(device=device).set(fraction)
            self.metrics.estimated_wait.set(batcher.estimated_wait_s())
            status.write_document(self._document(batcher, busy))

    def _count_buckets(self) -> None:
        hits = sum(runner.stats.hits for runner in self.engine.runners)
        misses = sum(runner.stats.misses for runner in self.engine.runners)
        self.metrics.bucket_batches.labels(outcome="hit").inc(hits - self.counted_hits)
        self.metrics.bucket_batches.labels(outcome="miss").inc(misses - self.counted_misses)
        self.counted_hits, self.counted_misses = hits, misses

    def _document(self, batcher: Batcher, busy: dict[str, float]) -> dict[str, Any]:
        model = self.engine.model
        assert model is not None
        card = {key: getattr(model, key) for key in ("name", "dimension", "max_tokens", "pooling")}
        models = {self.settings.model_name: {"path": str(model.path), "max_tokens": model.max_tokens}}
        fallback = self.engine.fallback
        if fallback is not None:
            encoder: Any = fallback.encoder
            models[fallback.model_id] = {"path": str(encoder.path), "max_tokens": encoder.max_tokens}
        return {
            "model": {**card, "path": str(model.path), "device": str(model.device)},  # a ModelCard
            "models": models,
            "main_id": batcher.config.model_id,
            "fallback_id": fallback.model_id if fallback else None,
            "versions": self.engine.versions(),
            "device_busy": busy,
            "health": batcher.health.snapshot(),
            "pid": os.getpid(),
        }

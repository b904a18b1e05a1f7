"""The engine process: the model and its batcher behind a ZeroMQ socket, with nothing else on its CPU.

Front ends send token ids (service/engine_wire.py); the engine queues them as one request each, batches them
across requests and answers each with its vectors. Its queue figures, health and model cards go to the status
block (service/engine_status.py) every PUBLISH_INTERVAL_S, where front ends read them for admission, /health
and /ready without asking. It stops when the supervisor asks (SIGTERM) or when the supervisor is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio

from embedperf.errors import EmbedperfError
from service.batch_errors import BatcherError
from service.batch_job import CLIENT_DISCONNECTED
from service.batcher import Batcher
from service.engine_status import EngineState, Slot, StatusBlock
from service.engine_wire import (
    CANCEL,
    SUBMIT,
    Frames,
    error_frames,
    read_cancel,
    read_message,
    read_submission,
    result_frames,
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
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s engine[{os.getpid()}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    asyncio.run(EngineServer(settings, endpoint, Path(status_path), generation).serve())
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
        self.tasks: dict[tuple[bytes, int], asyncio.Task[None]] = {}
        self.stop = asyncio.Event()
        self.parent_pid = os.getppid()
        self.counted_hits = self.counted_misses = 0

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stop.set)
        context = zmq.asyncio.Context()
        socket = context.socket(zmq.ROUTER)
        socket.setsockopt(zmq.LINGER, 1000)
        socket.bind(self.endpoint)
        self.status.set(Slot.GENERATION, self.generation)
        self.status.set(Slot.STATE, EngineState.STARTING)
        publisher = asyncio.create_task(self._publish_loop())
        try:
            await self.engine.start()
        except EmbedperfError as exc:  # a missing model or device runtime: the message says what to fix
            self.status.write_document({"failure": str(exc), "exit_code": exc.exit_code})
            self.status.set(Slot.STATE, EngineState.FAILED)
            publisher.cancel()
            socket.close()
            context.term()
            return
        except Exception as exc:
            log.exception("the engine could not get ready")
            self.status.write_document({"failure": f"{type(exc).__name__}: {exc}", "exit_code": 3})
            self.status.set(Slot.STATE, EngineState.FAILED)
            publisher.cancel()
            socket.close()
            context.term()
            return
        self._publish(document=True)
        self.status.set(Slot.STATE, EngineState.READY)
        log.info("engine ready: %s on %s", self.settings.model_name, self.settings.device)
        receiver = asyncio.create_task(self._receive(socket))
        await self.stop.wait()
        receiver.cancel()
        log.info("engine stopping: %d request(s) left", len(self.tasks))
        # The front ends have drained (and answered what could not finish): nobody waits for what is left.
        left = list(self.tasks.values())
        for task in left:
            task.cancel("cancelled")
        await asyncio.gather(*left, return_exceptions=True)
        await self.engine.stop(self.settings.shutdown_grace_s)
        self.status.set(Slot.STATE, EngineState.STOPPED)
        publisher.cancel()
        socket.close(linger=0)  # replies still unsent are for front ends that have gone
        context.term()
        log.info("engine stopped")

    async def _receive(self, socket: zmq.asyncio.Socket) -> None:
        while True:
            identity, frame = await socket.recv_multipart()
            message = read_message(frame)
            if message["kind"] == SUBMIT:
                submission = read_submission(message)
                key = (identity, submission.request_id)
                self.tasks[key] = asyncio.create_task(self._compute(socket, identity, submission))
            elif message["kind"] == CANCEL:
                request_id, reason = read_cancel(message)
                running = self.tasks.get((identity, request_id))
                if running is not None:
                    running.cancel(CLIENT_DISCONNECTED if reason == CLIENT_DISCONNECTED else "cancelled")

    async def _compute(self, socket: zmq.asyncio.Socket, identity: bytes, submission: Any) -> None:
        batcher = self.engine.batcher
        assert batcher is not None
        reply: Frames
        key = (identity, submission.request_id)
        try:
            result = await batcher.submit(
                [],
                submission.deadline_ms,
                judged=True,
                model=submission.model,
                token_ids=submission.token_ids,
            )
            reply = result_frames(submission.request_id, result)
        except BatcherError as exc:
            reply = error_frames(submission.request_id, exc)
        finally:
            self.tasks.pop(key, None)
        # Copied sends: below tens of kilobytes a copy is cheaper than a zero-copy frame's bookkeeping.
        await socket.send_multipart([identity, *reply], copy=reply_bytes(reply) >= ZERO_COPY_BYTES)

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
        figures = batcher.queue_figures()
        status.set(Slot.WAITING_INPUTS, figures.waiting_inputs)
        status.set(Slot.QUEUED_REQUESTS, figures.queued_requests)
        status.set(Slot.PER_INPUT_S, figures.per_input_s)
        status.set(Slot.WORKERS, figures.workers)
        status.set(Slot.QUEUE_SIZE, figures.queue_size)
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
        models = {self.settings.model_name: {"path": str(model.path), "max_tokens": model.max_tokens}}
        fallback = self.engine.fallback
        if fallback is not None:
            encoder: Any = fallback.encoder
            models[fallback.model_id] = {"path": str(encoder.path), "max_tokens": encoder.max_tokens}
        return {
            "model": {
                "name": model.name,
                "path": str(model.path),
                "dimension": model.dimension,
                "max_tokens": model.max_tokens,
                "pooling": model.pooling,
                "device": str(model.device),
            },
            "models": models,
            "main_id": batcher.config.model_id,
            "fallback_id": fallback.model_id if fallback else None,
            "versions": self.engine.versions(),
            "device_busy": busy,
            "health": batcher.health.snapshot(),
            "pid": os.getpid(),
        }


def reply_bytes(frames: Frames) -> int:
    return sum(memoryview(frame).nbytes for frame in frames)

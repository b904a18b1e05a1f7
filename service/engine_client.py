"""A front end's link to the engine process: the routes' batcher surface (service/engine_view.py) over a
ZeroMQ socket for requests and the engine's status block for everything else.

Admission, /health and /ready read the status block (no message, no wait); a request is tokenised here, sent
as token ids, and answered by the engine's reply. When the engine process ends, every request waiting on it
is answered 503 at once and /ready says so until the supervisor's next engine is warm; a request whose caller
gives up is cancelled in the engine too."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import zmq

from service.admission_rule import Admission, QueueFigures
from service.batch_errors import BatcherError, DeadlineExceeded, EngineUnavailable, ShuttingDown
from service.batch_job import CLIENT_DISCONNECTED, BatchResult
from service.engine_status import QUEUE_SLOTS, EngineState, Slot, StatusBlock
from service.engine_wire import (
    Reply,
    arrived,
    cancel_entry,
    message_frames,
    open_socket,
    read_reply,
    replies_of,
    submit_entry,
)
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings
from service.tokenize_stage import FrontTokenizer

log = logging.getLogger("service.frontend")
WATCH_INTERVAL_S = 0.02  # how soon requests waiting on an engine that ended are answered
READY_POLL_S = 0.05
TOKENIZE_OFF_LOOP_INPUTS = 64  # larger requests are tokenised on a thread, so the event loop stays free
TOKENIZE_TURN_INPUTS = 128  # inputs tokenised together in one turn of the loop; the rest wait for the next turn
UNAVAILABLE: dict[EngineState, str | None] = {  # why the routes cannot compute, by the engine's state
    EngineState.READY: None,
    EngineState.STARTING: "the engine process is starting (loading the model and warming up)",
    EngineState.DOWN: "the engine process ended; the supervisor is restarting it",
}


@dataclass
class ModelCard:
    """The served model's figures, as the engine published them."""

    name: str
    path: Path
    dimension: int
    max_tokens: int
    pooling: str
    device: str


@dataclass(frozen=True)
class StatusHealth:
    """The engine's device health as its status block says."""

    status: StatusBlock

    def healthy(self) -> bool:
        return bool(self.status.get(Slot.HEALTHY))

    def recent_errors(self) -> int:
        return int(self.status.get(Slot.RECENT_ERRORS))

    def retry_after_s(self) -> int:
        return max(1, int(self.status.get(Slot.RETRY_AFTER_S)))

    def snapshot(self) -> dict[str, int | bool]:
        return dict(self.status.read_document().get("health", {}))


@dataclass(eq=False)
class RemoteBatcher(Admission):
    """The batcher surface of the routes, for an engine in another process."""

    settings: ServiceSettings
    status: StatusBlock
    socket: zmq.Socket[bytes]
    tokenizers: dict[str, FrontTokenizer]
    main_id: str
    fallback_id: str | None
    metrics: ServiceMetrics

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Reply]] = {}
        self._outbox: list[dict[str, Any]] = []  # entries for the engine, sent together at the end of a turn
        self._to_tokenize: list[tuple[Callable[[], list[list[int]]], int, asyncio.Future[list[list[int]]]]] = []
        self.admit_wait_share = self.settings.admit_wait_share
        self.health = StatusHealth(self.status)
        self._generation = self.status.get(Slot.GENERATION)

    # ---- figures, from the status block ----------------------------------------------------------------------

    def queue_figures(self) -> QueueFigures:
        waiting, queued, per_input_s, workers, queue_size = (self.status.get(slot) for slot in QUEUE_SLOTS)
        queue_size = int(queue_size) or self.settings.queue_size
        return QueueFigures(int(waiting), int(queued), per_input_s, max(1, int(workers)), queue_size)

    @property
    def queue_depth(self) -> int:
        return int(self.status.get(Slot.WAITING_INPUTS))

    def busy_fraction(self) -> float:
        return self.status.get(Slot.BUSY_FRACTION)

    def serving_fallback(self) -> bool:
        return bool(self.fallback_id and self.status.get(Slot.FALLBACK_ON))

    def model_for_new_request(self) -> str:
        return self.fallback_id if self.fallback_id and self.serving_fallback() else self.main_id

    # ---- requests --------------------------------------------------------------------------------------------

    async def submit(
        self, texts: list[str], deadline_ms: float, judged: bool = False, model: str | None = None
    ) -> BatchResult:
        """Tokenise here, compute in the engine; raises what the in-process batcher would, EngineUnavailable
        when the engine process ends meanwhile, ShuttingDown when the shutdown grace runs out first."""
        t_start_s = time.perf_counter()
        model = model or self.model_for_new_request()
        if self.status.state != EngineState.READY:
            raise EngineUnavailable(self.unavailable_reason() or "not ready")
        tokenize = partial(self.tokenizers[model].token_ids, texts, self.settings.max_request_tokens)
        large = len(texts) > TOKENIZE_OFF_LOOP_INPUTS
        token_ids = await (asyncio.to_thread(tokenize) if large else self._tokenize_together(tokenize, len(texts)))
        tokenize_s = time.perf_counter() - t_start_s
        if not judged:  # within its limits: now it is work, judged on the wait its inputs would see
            self.check_admission(len(token_ids), deadline_ms)
        remaining_ms = deadline_ms - tokenize_s * 1000
        if remaining_ms <= 0:
            raise DeadlineExceeded(deadline_ms)
        request_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        self._waiting[request_id] = future
        expiry = loop.call_later(remaining_ms / 1000, self._expire, request_id, deadline_ms)  # the deadline
        try:
            self._post(submit_entry(request_id, remaining_ms, model, token_ids))
            reply = await future
        except ShuttingDown:
            self._cancel(request_id, "cancelled")
            raise
        except asyncio.CancelledError as exc:
            self._cancel(request_id, CLIENT_DISCONNECTED if CLIENT_DISCONNECTED in exc.args else "cancelled")
            raise
        finally:
            expiry.cancel()
            self._waiting.pop(request_id, None)
        if time.perf_counter() - t_start_s > deadline_ms / 1000:  # answered, but after its deadline
            raise DeadlineExceeded(deadline_ms)
        return read_reply(reply, [len(row) for row in token_ids], tokenize_s * 1000)

    def _expire(self, request_id: int, deadline_ms: float) -> None:
        """The deadline of a request still waiting: it is answered DeadlineExceeded and its work cancelled."""
        future = self._waiting.get(request_id)
        if future is not None and not future.done():
            future.set_exception(DeadlineExceeded(deadline_ms))
            self._cancel(request_id, "deadline")

    def _tokenize_together(
        self, tokenize: Callable[[], list[list[int]]], inputs: int
    ) -> asyncio.Future[list[list[int]]]:
        """Tokenise with the requests that come this far in the same turn of the event loop, one after another:
        the tokeniser's tables stay in the CPU's caches (one call alone, between requests, costs ~2.5x). At most
        TOKENIZE_TURN_INPUTS inputs a turn: a burst does not hold up /health or the engine's replies."""
        future: asyncio.Future[list[list[int]]] = asyncio.get_running_loop().create_future()
        self._to_tokenize.append((tokenize, inputs, future))
        if len(self._to_tokenize) == 1:  # a turn is scheduled while any request waits for one
            asyncio.get_running_loop().call_soon(self._tokenize_pending)
        return future

    def _tokenize_pending(self) -> None:
        taken = inputs = 0
        for tokenize, count, future in self._to_tokenize:
            if inputs >= TOKENIZE_TURN_INPUTS:
                break
            taken += 1
            if future.cancelled():  # its client hung up meanwhile
                continue
            inputs += count
            try:
                future.set_result(tokenize())
            except Exception as exc:  # a request's own refusal (InvalidInput, InputTooLong, TooManyTokens)
                future.set_exception(exc)
        del self._to_tokenize[:taken]
        if self._to_tokenize:
            asyncio.get_running_loop().call_soon(self._tokenize_pending)

    def _post(self, entry: dict[str, Any]) -> None:
        """Queue an entry for the engine: what this turn of the event loop posts is sent as one message."""
        self._outbox.append(entry)
        if len(self._outbox) == 1:
            asyncio.get_running_loop().call_soon(self._send)

    def _send(self) -> None:
        """Send the outbox without waiting (a DEALER socket queues up to SEND_QUEUE_MESSAGES messages); when the
        engine does not read them, the requests posted are answered EngineUnavailable."""
        entries, self._outbox = self._outbox, []
        try:
            self.socket.send_multipart(message_frames(entries), flags=zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # Again: the queue is full; any other: the socket is closed (stopping)
            why = "its queue of messages is full" if isinstance(exc, zmq.Again) else f"the link is closed: {exc}"
            self._fail([entry["id"] for entry in entries], EngineUnavailable(why))
        self.read_replies()  # any operation may consume the socket's readiness signal: read what has arrived

    def _cancel(self, request_id: int, reason: str) -> None:
        self._post(cancel_entry(request_id, reason))  # after the request's own submission, never before it

    def read_replies(self) -> None:
        """Hand each reply that has arrived to the request waiting for it (one that gave up is dropped). Called
        when the socket's descriptor is readable, and after every send."""
        for frames in arrived(self.socket, copy=False):
            for reply in replies_of(frames):
                future = self._waiting.get(reply[0]["id"])
                if future is not None and not future.done():
                    future.set_result(reply)

    async def watch_engine(self) -> None:
        """Fail the waiting requests at once when their engine ends, or when the shutdown grace runs out."""
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            generation = self.status.get(Slot.GENERATION)
            state = self.status.state
            if state != EngineState.READY or generation != self._generation:
                self._fail_all(EngineUnavailable(self.unavailable_reason() or "restarted"))
                if state == EngineState.READY:
                    self._generation = generation
            if self.status.get(Slot.DRAINING) and time.monotonic() >= self.status.get(Slot.DRAIN_DEADLINE_S):
                self._fail_all(ShuttingDown())

    def _fail_all(self, error: BatcherError) -> None:
        self._fail(list(self._waiting), error)

    def _fail(self, request_ids: list[int], error: BatcherError) -> None:
        for request_id in request_ids:
            if (future := self._waiting.get(request_id)) is not None and not future.done():
                future.set_exception(error)

    def unavailable_reason(self) -> str | None:
        state = self.status.state
        if state == EngineState.FAILED:
            return f"the engine process could not get ready: {self.status.read_document().get('failure')}"
        return UNAVAILABLE.get(state, "the engine process has stopped")


class RemoteEngine:
    """The Engine of a front end: waits for the engine process to be warm, then links the routes to it."""

    def __init__(
        self, settings: ServiceSettings, endpoint: str, status_path: Path, metrics: ServiceMetrics
    ) -> None:
        self.settings = settings
        self.endpoint = endpoint
        self.status = StatusBlock.open(status_path)
        self.metrics = metrics
        self.model: ModelCard | None = None
        self.batcher: RemoteBatcher | None = None
        self._context = zmq.Context()
        self._reader_fd: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._document: dict[str, Any] = {}

    async def start(self) -> None:
        while self.status.state != EngineState.READY:
            if self.status.state == EngineState.FAILED:
                failure = self.status.read_document().get("failure")
                raise EngineUnavailable(f"it could not get ready: {failure}")
            await asyncio.sleep(READY_POLL_S)
        document = self._document = self.status.read_document()
        self.model = ModelCard(**{**document["model"], "path": Path(document["model"]["path"])})
        truncate = self.settings.long_input == "truncate"
        tokenizers = {
            model_id: FrontTokenizer(Path(entry["path"]), int(entry["max_tokens"]), truncate)
            for model_id, entry in document["models"].items()
        }
        socket = open_socket(self._context, zmq.DEALER)
        socket.connect(self.endpoint)
        model_ids = document["main_id"], document.get("fallback_id")
        self.batcher = RemoteBatcher(self.settings, self.status, socket, tokenizers, *model_ids, self.metrics)
        # Plain (not asyncio) ZeroMQ: a send never waits, and replies are read when the socket's descriptor
        # says so, without a future per operation.
        self._reader_fd = int(socket.getsockopt(zmq.FD))
        asyncio.get_running_loop().add_reader(self._reader_fd, self.batcher.read_replies)
        self._tasks = [asyncio.create_task(self.batcher.watch_engine())]

    async def stop(self, grace_s: float) -> None:
        for task in self._tasks:
            task.cancel()
        if self._reader_fd is not None:
            asyncio.get_running_loop().remove_reader(self._reader_fd)
        self._context.destroy(linger=0)

    def device_busy_fractions(self) -> dict[str, float]:
        return dict(self.status.read_document().get("device_busy", {}))

    def versions(self) -> dict[str, object]:
        return dict(self._document.get("versions", {}))

    def process_id(self) -> int:
        return int(self.status.read_document().get("pid", 0))

    def unavailable_reason(self) -> str | None:
        return self.batcher.unavailable_reason() if self.batcher else "the engine is not linked yet"

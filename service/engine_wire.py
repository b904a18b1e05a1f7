"""The messages between front ends and the engine process: msgpack headers and raw numpy buffers as frames
of one ZeroMQ message, so token ids and vectors cross without pickling or copying into Python objects. What one
side has to say in one turn of its event loop travels as one message (one send, one wake-up of the other side).

front end -> engine  [[entry, ...]] (one frame), each entry SUBMIT {kind: S, id, deadline_ms, model, lengths,
                     ids: int32 bytes} or CANCEL {kind: C, id, reason}, in the order the front end made them
engine -> front end  [[header{id, result or error}, ...], vectors (float32, rows x dimension) per header]"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import zmq

from service.batch_errors import (
    BatcherError,
    BatcherStopped,
    ComputeFailed,
    DeadlineExceeded,
    InputTooLong,
    InvalidInput,
    Overloaded,
    QueueFull,
    TooManyTokens,
)
from service.batch_job import BatchResult

SEND_QUEUE_MESSAGES = 100_000  # messages queued for a peer that is not reading (an engine restarting)
SUBMIT = "S"
CANCEL = "C"
Frames = list[Any]  # bytes or zmq.Frame (anything with the buffer protocol)
Reply = tuple[dict[str, Any], Any]  # one request's header and its vectors (a buffer)
REPLY_FIELDS = ("queue_ms", "compute_ms", "batch_size", "batch_tokens", "model")  # of BatchResult, in a reply
# A batcher error on the wire: its kind, its class, and the attributes its constructor takes back ("message":
# str(error)); the last row is the default.
ERROR_KINDS: list[tuple[str, type[BatcherError], tuple[str, ...]]] = [
    ("queue_full", QueueFull, ("waiting", "queue_size")),
    ("deadline", DeadlineExceeded, ("deadline_ms",)),
    ("too_long", InputTooLong, ("index", "max_tokens")),
    ("too_many_tokens", TooManyTokens, ("tokens", "limit", "complete")),
    ("overloaded", Overloaded, ("estimated_wait_s", "limit_s")),
    ("invalid", InvalidInput, ("message",)),
    ("stopped", BatcherStopped, ()),
    ("failed", ComputeFailed, ("message",)),
]


def open_socket(context: zmq.Context[Any], kind: int) -> zmq.Socket[bytes]:
    """A socket of either side; it never waits to close (what is unsent is for a peer that has gone)."""
    socket = context.socket(kind)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SNDHWM, SEND_QUEUE_MESSAGES)
    return socket


def arrived(socket: zmq.Socket[bytes], copy: bool) -> Iterator[Frames]:
    """Every message that has arrived (ZeroMQ signals readiness by edges: read until none is left)."""
    while int(socket.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
        yield socket.recv_multipart(flags=zmq.NOBLOCK, copy=copy)


@dataclass(frozen=True)
class Submission:
    request_id: int
    deadline_ms: float
    model: str
    token_ids: list[list[int]]


def submit_entry(request_id: int, deadline_ms: float, model: str, token_ids: list[list[int]]) -> dict[str, Any]:
    lengths = [len(row) for row in token_ids]
    flat = np.fromiter((t for row in token_ids for t in row), dtype=np.int32, count=sum(lengths))
    return dict(kind=SUBMIT, id=request_id, deadline_ms=deadline_ms, model=model, lengths=lengths, ids=flat.tobytes())


def cancel_entry(request_id: int, reason: str) -> dict[str, Any]:
    return {"kind": CANCEL, "id": request_id, "reason": reason}


def message_frames(entries: list[dict[str, Any]]) -> Frames:
    return [msgpack.packb(entries)]


def read_message(frame: Any) -> list[dict[str, Any]]:
    """A front end's entries: each one's `kind` says which (SUBMIT or CANCEL)."""
    return msgpack.unpackb(frame)


def read_submission(message: dict[str, Any]) -> Submission:
    flat, lengths = np.frombuffer(message["ids"], dtype=np.int32).tolist(), message["lengths"]
    rows = [flat[end - n : end] for n, end in zip(lengths, itertools.accumulate(lengths), strict=True)]
    return Submission(int(message["id"]), float(message["deadline_ms"]), str(message["model"]), rows)


def read_cancel(message: dict[str, Any]) -> tuple[int, str]:
    return int(message["id"]), str(message["reason"])


def result_reply(request_id: int, result: BatchResult) -> Reply:
    vectors = np.ascontiguousarray(result.embeddings, dtype=np.float32)
    header = {"id": request_id, "shape": list(vectors.shape), **{f: getattr(result, f) for f in REPLY_FIELDS}}
    return header, vectors


def error_reply(request_id: int, error: BatcherError) -> Reply:
    return {"id": request_id, "error": error_fields(error)}, b""


def reply_frames(replies: list[Reply]) -> Frames:
    return [msgpack.packb([header for header, _ in replies]), *(vectors for _, vectors in replies)]


def replies_of(frames: Frames) -> Iterator[Reply]:
    """The replies of one message from the engine: each header with its vectors' frame."""
    return zip(msgpack.unpackb(frames[0]), frames[1:], strict=True)


def read_reply(reply: Reply, token_counts: list[int], tokenize_ms: float) -> BatchResult:
    """The request's result; raises the BatcherError the engine answered instead."""
    header, frame = reply
    if "error" in header:
        raise error_from_fields(header["error"])
    rows, dimension = header["shape"]
    vectors = np.frombuffer(frame, dtype=np.float32).reshape(rows, dimension)
    fields = {name: header[name] for name in REPLY_FIELDS}
    return BatchResult(vectors, token_counts, tokenize_ms=tokenize_ms, **fields)


def error_fields(error: BatcherError) -> list[Any]:
    """A batcher error as plain values: its kind and what rebuilds it."""
    kind, _, fields = next((row for row in ERROR_KINDS if isinstance(error, row[1])), ERROR_KINDS[-1])
    return [kind, *(str(error) if name == "message" else getattr(error, name) for name in fields)]


def error_from_fields(fields: list[Any]) -> BatcherError:
    kind, args = fields[0], fields[1:]
    error_class = next((row[1] for row in ERROR_KINDS if row[0] == kind), ComputeFailed)
    return error_class(*args)

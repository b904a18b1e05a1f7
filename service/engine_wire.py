"""The messages between front ends and the engine process: a msgpack header and raw numpy buffers as frames
of one ZeroMQ message, so token ids and vectors cross without pickling or copying into Python objects.

front end -> engine  SUBMIT: [{kind: S, id, deadline_ms, model, lengths, ids: int32 bytes}] (one frame, one send)
                     CANCEL: [{kind: C, id, reason}]
engine -> front end  REPLY:  [header{id, result or error}, vectors (float32, rows x dimension)]"""

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


def submit_frames(request_id: int, deadline_ms: float, model: str, token_ids: list[list[int]]) -> Frames:
    lengths = [len(row) for row in token_ids]
    flat = np.fromiter((t for row in token_ids for t in row), dtype=np.int32, count=sum(lengths))
    message = dict(kind=SUBMIT, id=request_id, deadline_ms=deadline_ms, model=model, lengths=lengths)
    return [msgpack.packb({**message, "ids": flat.tobytes()})]


def cancel_frames(request_id: int, reason: str) -> Frames:
    return [msgpack.packb({"kind": CANCEL, "id": request_id, "reason": reason})]


def read_message(frame: Any) -> dict[str, Any]:
    """A front end's message: its `kind` says which (SUBMIT or CANCEL)."""
    return msgpack.unpackb(frame)


def read_submission(message: dict[str, Any]) -> Submission:
    flat, lengths = np.frombuffer(message["ids"], dtype=np.int32).tolist(), message["lengths"]
    rows = [flat[end - n : end] for n, end in zip(lengths, itertools.accumulate(lengths), strict=True)]
    return Submission(int(message["id"]), float(message["deadline_ms"]), str(message["model"]), rows)


def read_cancel(message: dict[str, Any]) -> tuple[int, str]:
    return int(message["id"]), str(message["reason"])


def result_frames(request_id: int, result: BatchResult) -> Frames:
    vectors = np.ascontiguousarray(result.embeddings, dtype=np.float32)
    header = {"id": request_id, "shape": list(vectors.shape), **{f: getattr(result, f) for f in REPLY_FIELDS}}
    return [msgpack.packb(header), vectors]


def error_frames(request_id: int, error: BatcherError) -> Frames:
    return [msgpack.packb({"id": request_id, "error": error_fields(error)}), b""]


def reply_id(frames: Frames) -> int:
    return int(msgpack.unpackb(frames[0])["id"])


def read_reply(frames: Frames, token_counts: list[int], tokenize_ms: float) -> BatchResult:
    """The request's result; raises the BatcherError the engine answered instead."""
    header = msgpack.unpackb(frames[0])
    if "error" in header:
        raise error_from_fields(header["error"])
    rows, dimension = header["shape"]
    vectors = np.frombuffer(frames[1], dtype=np.float32).reshape(rows, dimension)
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

"""The messages between front ends and the engine process: a msgpack header and raw numpy buffers as frames
of one ZeroMQ message, so token ids and vectors cross without pickling or copying into Python objects.

front end -> engine  SUBMIT: [b"S", header{id, deadline_ms, model}, token ids (int32), lengths (int32)]
                     CANCEL: [b"C", header{id, reason}]
engine -> front end  REPLY:  [header{id, result or error}, vectors (float32, rows x dimension)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

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

SUBMIT = b"S"
CANCEL = b"C"
Frames = list[Any]  # bytes or zmq.Frame (anything with the buffer protocol)


@dataclass(frozen=True)
class Submission:
    request_id: int
    deadline_ms: float
    model: str
    token_ids: list[list[int]]


def submit_frames(request_id: int, deadline_ms: float, model: str, token_ids: list[list[int]]) -> Frames:
    lengths = np.fromiter((len(row) for row in token_ids), dtype=np.int32, count=len(token_ids))
    flat = np.fromiter((t for row in token_ids for t in row), dtype=np.int32, count=int(lengths.sum()))
    header = msgpack.packb({"id": request_id, "deadline_ms": deadline_ms, "model": model})
    return [SUBMIT, header, flat, lengths]


def cancel_frames(request_id: int, reason: str) -> Frames:
    return [CANCEL, msgpack.packb({"id": request_id, "reason": reason})]


def read_submission(frames: Frames) -> Submission:
    header = msgpack.unpackb(frames[1])
    flat = np.frombuffer(frames[2], dtype=np.int32)
    lengths = np.frombuffer(frames[3], dtype=np.int32)
    ends = np.cumsum(lengths)
    rows = [flat[end - n : end].tolist() for end, n in zip(ends.tolist(), lengths.tolist(), strict=True)]
    return Submission(int(header["id"]), float(header["deadline_ms"]), str(header["model"]), rows)


def read_cancel(frames: Frames) -> tuple[int, str]:
    header = msgpack.unpackb(frames[1])
    return int(header["id"]), str(header["reason"])


def result_frames(request_id: int, result: BatchResult) -> Frames:
    header = {
        "id": request_id,
        "queue_ms": result.queue_ms,
        "compute_ms": result.compute_ms,
        "batch_size": result.batch_size,
        "batch_tokens": result.batch_tokens,
        "model": result.model,
    }
    vectors = np.ascontiguousarray(result.embeddings, dtype=np.float32)
    header["shape"] = list(vectors.shape)
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
    return BatchResult(
        embeddings=vectors,
        token_counts=token_counts,
        queue_ms=float(header["queue_ms"]),
        tokenize_ms=tokenize_ms,
        compute_ms=float(header["compute_ms"]),
        batch_size=int(header["batch_size"]),
        batch_tokens=int(header["batch_tokens"]),
        model=str(header["model"]),
    )


def error_fields(error: BatcherError) -> list[Any]:
    """A batcher error as plain values: its kind and what rebuilds it."""
    if isinstance(error, QueueFull):
        return ["queue_full", error.waiting, error.queue_size]
    if isinstance(error, DeadlineExceeded):
        return ["deadline", error.deadline_ms]
    if isinstance(error, InputTooLong):
        return ["too_long", error.index, error.max_tokens]
    if isinstance(error, TooManyTokens):
        return ["too_many_tokens", error.tokens, error.limit, error.complete]
    if isinstance(error, Overloaded):
        return ["overloaded", error.estimated_wait_s, error.limit_s]
    if isinstance(error, InvalidInput):
        return ["invalid", str(error)]
    if isinstance(error, BatcherStopped):
        return ["stopped"]
    return ["failed", str(error)]


def error_from_fields(fields: list[Any]) -> BatcherError:
    kind, args = fields[0], fields[1:]
    if kind == "queue_full":
        return QueueFull(*args)
    if kind == "deadline":
        return DeadlineExceeded(*args)
    if kind == "too_long":
        return InputTooLong(*args)
    if kind == "too_many_tokens":
        return TooManyTokens(*args)
    if kind == "overloaded":
        return Overloaded(*args)
    if kind == "invalid":
        return InvalidInput(*args)
    if kind == "stopped":
        return BatcherStopped()
    return ComputeFailed(*args)

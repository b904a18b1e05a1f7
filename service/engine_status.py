"""The engine's status as every front end reads it: a small memory-mapped file the engine process writes and
the front ends read without a message or a lock, so a probe or a refusal never waits on the engine.

Hot figures (queue, service time, health, the engine's state) are float64 slots read one at a time; the rest
(model cards, versions, per-device busy fractions, health details) is a JSON document behind a sequence
counter that is odd while it is being written (a seqlock), so a reader never sees half of one."""

from __future__ import annotations

import enum
import json
import mmap
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

SLOTS = 32
DOC_BYTES = 1 << 16
FILE_BYTES = SLOTS * 8 + DOC_BYTES
READ_ATTEMPTS = 100


class EngineState(enum.IntEnum):
    STARTING = 0  # loading, warming up
    READY = 1
    FAILED = 2  # could not get ready (the document's `failure` says why)
    STOPPED = 3  # stopped on request
    DOWN = 4  # the process ended unasked (set by the supervisor, which restarts it)


class Slot(enum.IntEnum):
    SEQ = 0  # document sequence: odd while the document is being written
    DOC_BYTES = 1
    STATE = 2
    GENERATION = 3  # how many engine processes have started; a front end's requests die with theirs
    HEARTBEAT_S = 4  # time.monotonic() of the engine's last publication
    WAITING_INPUTS = 5
    QUEUED_REQUESTS = 6
    PER_INPUT_S = 7
    WORKERS = 8
    QUEUE_SIZE = 9
    BUSY_FRACTION = 10
    HEALTHY = 11
    RECENT_ERRORS = 12
    RETRY_AFTER_S = 13
    FALLBACK_ON = 14
    DRAINING = 15  # the service is shutting down (set by the supervisor)
    DRAIN_DEADLINE_S = 16  # time.monotonic() by which requests still running are answered 503


# The slots of the queue figures admission reads (service/admission_rule.py's QueueFigures), in its field order
QUEUE_SLOTS = (Slot.WAITING_INPUTS, Slot.QUEUED_REQUESTS, Slot.PER_INPUT_S, Slot.WORKERS, Slot.QUEUE_SIZE)


class StatusBlock:
    """One engine status file, mapped into memory. The engine writes figures and the document; the supervisor
    writes the state of a process that ended and the drain; front ends read."""

    def __init__(self, handle: mmap.mmap) -> None:
        self._map = handle
        self.slots = np.frombuffer(handle, dtype=np.float64, count=SLOTS)
        self._doc = memoryview(handle)[SLOTS * 8 :]

    @classmethod
    def create(cls, path: Path) -> StatusBlock:
        with path.open("wb") as handle:
            handle.truncate(FILE_BYTES)
        return cls.open(path)

    @classmethod
    def open(cls, path: Path) -> StatusBlock:
        fd = os.open(path, os.O_RDWR)
        try:
            return cls(mmap.mmap(fd, FILE_BYTES))
        finally:
            os.close(fd)

    def get(self, slot: Slot) -> float:
        return float(self.slots[slot])

    def set(self, slot: Slot, value: float) -> None:
        self.slots[slot] = value

    @property
    def state(self) -> EngineState:
        return EngineState(int(self.slots[Slot.STATE]))

    def write_document(self, document: dict[str, Any]) -> None:
        data = json.dumps(document, separators=(",", ":")).encode()[:DOC_BYTES]
        self.slots[Slot.SEQ] += 1
        self._doc[: len(data)] = data
        self.slots[Slot.DOC_BYTES] = len(data)
        self.slots[Slot.SEQ] += 1

    def read_document(self) -> dict[str, Any]:
        """The newest whole document ({} before the first)."""
        for _ in range(READ_ATTEMPTS):
            seq = self.slots[Slot.SEQ]
            if int(seq) % 2:
                time.sleep(0)
                continue
            data = bytes(self._doc[: int(self.slots[Slot.DOC_BYTES])])
            if self.slots[Slot.SEQ] == seq:
                return json.loads(data) if data else {}
        return {}

    def close(self) -> None:
        self.slots = np.zeros(SLOTS)
        self._doc.release()
        self._map.close()

"""What the batcher passes between its stages: its configuration, one request's job, one request's result.

Kept apart from service/batcher.py so the HTTP side (results, the hang-up reason) and the tests read them
without the batcher's threads."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from service.batch_errors import BatcherError
from service.fair_queue import Item

SORT_WINDOW_BATCHES = 2  # sorting by length reorders this many batches' worth of the fair sequence
TOKENIZE_SLICE = 64  # inputs of one request per tokeniser call: a large request cannot hold the tokeniser
COMPUTE_NICE = 5  # niceness of the tokeniser and inference threads, added to the process's own
# A running batch whose callers have gone down to this share (or none) stops at its next layer; the inputs
# still wanted go back to the front of the queue and are recomputed in a smaller batch.
RESTART_LIVE_SHARE = 0.25
# The cancellation message of a caller whose client hung up (the HTTP layer cancels with it), so the
# abandonment is counted as `disconnected` rather than `cancelled`.
CLIENT_DISCONNECTED = "disconnected"


def yield_cpu_to_event_loop() -> None:
    """Lower the calling thread's CPU priority (Linux: nice is per thread, inherited by threads it starts, such
    as torch's intra-op pool), so that on a host short of CPU the event loop still answers probes and 429s at
    once instead of queueing behind compute. A no-op where not permitted."""
    with contextlib.suppress(AttributeError, OSError):
        own = os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread's: the event loop's
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, own + COMPUTE_NICE))


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
    max_request_tokens: int = 0  # most tokens in one request (0: no limit)
    model_id: str = "model"  # what results name as the model that produced them
    # Lower the tokeniser's and workers' priority below the event loop's (one process serving HTTP too);
    # an engine process of its own keeps its compute at full priority.
    yield_to_event_loop: bool = True
    first_worker_first: bool = False  # an idle first worker takes each batch before the others (overlap on)


@dataclass
class BatchResult:
    """Embeddings of one request, the model that produced them, and where its time went. batch_size /
    batch_tokens describe the largest batch the request rode in (a request with many inputs is spread over
    several batches); batch_tokens counts padded tokens (inputs x longest), what the device computed."""

    embeddings: np.ndarray
    token_counts: list[int]
    queue_ms: float
    tokenize_ms: float
    compute_ms: float
    batch_size: int
    batch_tokens: int
    model: str = "model"


@dataclass(eq=False)
class BatchJob:
    """One request inside the batcher: its texts, its future, and how far its inputs have come."""

    texts: list[str]  # empty when the request came tokenised (token_ids given to Batcher.enqueue)
    size: int  # inputs in the request
    future: asyncio.Future[BatchResult | BatcherError]  # an error is a result: see _resolve
    deadline_s: float
    deadline_ms: float
    model: str
    seq: int = 0  # arrival order
    t_submit_s: float = field(default_factory=time.perf_counter)
    claimed: int = 0  # inputs handed to a tokeniser call so far
    tokenize_s: float = 0.0
    tokens: int = 0  # tokens of the inputs tokenised so far
    token_counts: list[int] = field(default_factory=list)
    results: np.ndarray | None = None
    remaining: int = 0  # inputs not yet computed
    compute_s: float = 0.0
    batch_size: int = 0
    batch_tokens: int = 0
    counted: int = 0  # inputs of this job still counted in the queue depth (not yet batched or dropped)
    unjudged: bool = False  # admission judges it on the estimated wait once its first slice is tokenised
    finished: bool = False  # set once the future has been (or is being) resolved
    cancelled: bool = False  # set by the event loop when the caller gave up

    def unwanted(self) -> bool:
        """No input of it needs computing: answered (or being answered), or its caller gave up."""
        return self.finished or self.cancelled


Claim = tuple[BatchJob, int, int]  # a request and the slice [start, end) of its texts in one tokeniser call
Work = tuple[Literal["compute"], list[Item[BatchJob]]] | tuple[Literal["tokenize"], list[Claim]]

"""Tokenised inputs waiting for a batch, kept per request, and the fair choice of the next batch.

Batches interleave requests round-robin: the first input of every waiting request (in arrival order), then
the second of those with two or more, and so on. Requests of one input each are served in arrival order; a
request of 2,048 inputs is spread over many batches, each also carrying the inputs of the requests that
arrived after it, so a small request behind a large one waits a batch or two, not for the whole of it
(text-embeddings-inference and vLLM interleave requests the same way). Sorting by length, when on, only
reorders a window of that fair sequence, and the oldest request's first input is always in the batch."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class Owner(Protocol):
    """The request an input belongs to: its arrival number orders requests; only inputs for the same model
    share a batch."""

    seq: int
    model: str


J = TypeVar("J", bound=Owner)


@dataclass(eq=False)
class Item(Generic[J]):
    """One tokenised input of a request."""

    job: J
    index: int  # position in the request's input list
    ids: list[int]
    t_enqueued_s: float

    @property
    def length(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold: inputs, padded tokens (inputs x longest), and how to choose them."""

    max_inputs: int
    max_tokens: int
    sort_by_length: bool
    batching: bool
    sort_window: int  # how many inputs of the fair sequence sorting by length may reorder


@dataclass
class FairQueue(Generic[J]):
    """Pending inputs grouped by request (oldest request first); not thread-safe (the batcher's lock guards it)."""

    _jobs: dict[J, list[Item[J]]] = field(default_factory=dict)
    _count: int = 0

    def __len__(self) -> int:
        return self._count

    def add(self, items: list[Item[J]]) -> None:
        """Queue a request's newly tokenised inputs behind its earlier ones."""
        for item in items:
            self._queued(item.job).append(item)
        self._count += len(items)

    def requeue(self, items: list[Item[J]]) -> None:
        """Put inputs taken for a batch back in front of their requests' other inputs (a stopped batch)."""
        for item in sorted(items, key=lambda it: it.index, reverse=True):
            self._queued(item.job).insert(0, item)
        self._count += len(items)

    def _queued(self, job: J) -> list[Item[J]]:
        """The request's queued inputs; a request new to the queue (or back in it) joins in arrival order."""
        queued = self._jobs.get(job)
        if queued is None:
            last = next(reversed(self._jobs), None)
            queued = self._jobs[job] = []
            if last is not None and last.seq > job.seq:
                self._jobs = dict(sorted(self._jobs.items(), key=lambda entry: entry[0].seq))
        return queued

    def oldest(self) -> Item[J]:
        """The first input of the oldest request (the queue must not be empty)."""
        return next(iter(self._jobs.values()))[0]

    def drop(self, unwanted: Callable[[J], bool]) -> list[Item[J]]:
        """Remove and return every input of the requests `unwanted` names."""
        gone = [job for job in self._jobs if unwanted(job)]
        dropped = [item for job in gone for item in self._jobs.pop(job)]
        self._count -= len(dropped)
        return dropped

    def drop_job(self, job: J) -> None:
        self._count -= len(self._jobs.pop(job, []))

    def fair_sequence(self) -> Iterator[Item[J]]:
        """Inputs round-robin over requests: every request's first input in arrival order, then the seconds..."""
        lists = list(self._jobs.values())
        depth = 0
        while lists:
            for queued in lists:
                yield queued[depth]
            depth += 1
            lists = [queued for queued in lists if len(queued) > depth]

    def select(self, limits: BatchLimits) -> list[Item[J]]:
        """Take the next batch out of the queue: within the limits, in fair order (reordered by length within
        a window when asked), always holding the oldest request's first input."""
        oldest = self.oldest()
        if not limits.batching:
            candidates = list(self._jobs[oldest.job])
        else:
            candidates = window = list(itertools.islice(self.fair_sequence(), max(1, limits.sort_window)))
            if limits.sort_by_length:
                position = {id(item): i for i, item in enumerate(window)}
                candidates = sorted(window, key=lambda it: (abs(it.length - oldest.length), position[id(it)]))
        chosen: list[Item[J]] = []
        longest = 0
        for item in candidates:
            if item.job.model != oldest.job.model:
                continue
            if len(chosen) >= limits.max_inputs:
                break
            new_longest = max(longest, item.length)
            if chosen and new_longest * (len(chosen) + 1) > limits.max_tokens:
                if limits.sort_by_length and limits.batching:
                    continue  # a shorter input further on may still fit
                break
            chosen.append(item)
            longest = new_longest
        self._take(chosen)
        return chosen

    def _take(self, chosen: list[Item[J]]) -> None:
        taken = {id(item) for item in chosen}
        for job in {item.job: None for item in chosen}:
            rest = [item for item in self._jobs[job] if id(item) not in taken]
            if rest:
                self._jobs[job] = rest
            else:
                del self._jobs[job]
        self._count -= len(chosen)

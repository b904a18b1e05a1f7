"""Result caches: the in-process LRU keyed by input text (one model per process), and the pair LRU + Redis."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from service.metrics import ServiceMetrics


class CachedEmbedding(NamedTuple):
    vector: np.ndarray
    tokens: int


class EmbeddingCache:
    """Bounded LRU; size 0 disables it (every lookup misses, nothing is stored)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CachedEmbedding] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> CachedEmbedding | None:
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(text)
            if entry is not None:
                self._entries.move_to_end(text)
            return entry

    def put(self, text: str, vector: np.ndarray, tokens: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries[text] = CachedEmbedding(vector, tokens)
            self._entries.move_to_end(text)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)


@dataclass
class CacheLookup:
    """What the caches hold for one request's inputs; `shared_down` when Redis could not be asked."""

    entries: list[CachedEmbedding | None]
    shared_down: bool = False

    @property
    def missing(self) -> list[int]:
        return [i for i, entry in enumerate(self.entries) if entry is None]

    def header(self) -> str:
        """X-Cache: hit (every input cached), partial (some), miss (none), bypass (Redis down, not all hit).

        A multi-input request is a hit only when every input was; partial says the request still waited
        for the device, so a client timing it knows it was not a pure cache answer.
        """
        found = len(self.entries) - len(self.missing)
        if found == len(self.entries):
            return "hit"
        if self.shared_down:
            return "bypass"
        return "partial" if found else "miss"


class SharedCache(Protocol):
    """The shared cache ResultCache asks after its LRU (service/cache_redis.py's RedisCache)."""

    async def get_many(self, texts: Sequence[str]) -> list[CachedEmbedding | None] | None: ...
    async def put_many(self, entries: Sequence[tuple[str, np.ndarray, int]]) -> None: ...
    def status(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...


@dataclass(eq=False)
class ResultCache:
    """The in-process LRU, then the shared Redis cache; counts hits and misses per input."""

    local: EmbeddingCache
    shared: SharedCache | None
    metrics: ServiceMetrics

    @property
    def enabled(self) -> bool:
        return self.local.enabled or self.shared is not None

    async def lookup(self, texts: list[str]) -> CacheLookup:
        result = CacheLookup([self.local.get(text) for text in texts])
        if self.shared is not None and result.missing:
            missing = result.missing
            shared = await self.shared.get_many([texts[i] for i in missing])
            if shared is None:
                result.shared_down = True
            else:
                for index, entry in zip(missing, shared, strict=True):
                    if entry is not None:
                        result.entries[index] = entry
                        self.local.put(texts[index], entry.vector, entry.tokens)
        if self.enabled:
            self.metrics.cache_hits.inc(len(texts) - len(result.missing))
            self.metrics.cache_misses.inc(len(result.missing))
        return result

    async def store(self, entries: list[tuple[str, np.ndarray, int]]) -> None:
        for text, vector, tokens in entries:
            self.local.put(text, vector, tokens)
        if self.shared is not None:
            await self.shared.put_many(entries)

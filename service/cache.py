"""In-process LRU cache of embeddings keyed by input text (one model per process, so text is the key)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np


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

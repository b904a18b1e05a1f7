"""The encoder protocol: what the batcher needs from a model (tokenise, embed token ids, stop part-way)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

StopCheck = Callable[[], bool]


class Encoder(Protocol):
    """The model as the batcher sees it. `embed_token_ids` may call `should_stop` between its layers and raise
    ComputeStopped when it returns True (the batch is no longer worth finishing); it may also ignore it."""

    max_tokens: int

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]: ...

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray: ...


class ComputeStopped(Exception):
    """Raised by an encoder that stopped a batch part-way because nobody waits for its result any more."""

"""`--compute-sleep-ms`: an encoder that does not compute. Each batch sleeps a fixed time (the GIL released, as
a device computing would leave it) and is answered unit vectors of the model's dimension, so a benchmark
measures the serving stack's own cost with model compute taken out (`make bench-split`)."""

from __future__ import annotations

import math
import time

import numpy as np

from modelcore.encoder import Encoder, StopCheck


class SleepCompute:
    """Stands in for `model` in a worker: its tokeniser and limits, a sleep instead of its forward pass."""

    def __init__(self, model: Encoder, sleep_ms: float, dimension: int) -> None:
        self.model = model
        self.max_tokens = model.max_tokens
        self.sleep_s = sleep_ms / 1000
        self.vector = np.full(dimension, 1 / math.sqrt(dimension), dtype=np.float32)

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        return self.model.tokenize(texts, max_length)

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        time.sleep(self.sleep_s)
        return np.tile(self.vector, (len(batch), 1))

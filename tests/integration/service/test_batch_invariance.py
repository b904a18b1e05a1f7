"""A text's vector does not depend on the batch or bucket that carried it: alone, in a full batch of other
lengths, and padded to a static bucket shape (the path of device graphs and compiled shapes)."""

from __future__ import annotations

import numpy as np

from modelcore.graphs import bucket_shapes
from modelcore.model import load_model

TEXTS = [
    "short",
    "一个中文句子，用来测试分词和填充。",
    "a sentence of medium length about embedding services under load " * 2,
    "long " * 200,  # at the model's token limit
    "the quick brown fox",
    "capacity planning with exact percentiles and device telemetry, before and after",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_alone_batched_and_bucketed_vectors_agree_at_fp32() -> None:
    model = load_model(threads=1)
    ids = model.tokenize(TEXTS)
    alone = np.vstack([model.embed_token_ids([row]) for row in ids])
    filler = model.tokenize([f"filler text {i} " * (1 + 7 * i) for i in range(26)])
    batched = model.embed_token_ids(ids + filler)[: len(ids)]  # one full batch of 32, lengths 3 to 256
    assert cosines(alone, batched).min() >= 0.99999

    runner = model.use_buckets(bucket_shapes(32, model.max_tokens, 8192), capture=False, compile_cpu=False)
    bucketed = np.vstack([model.embed_token_ids([row]) for row in ids])  # padded to (1, 16..256) shapes
    mixed = model.embed_token_ids(filler[:5] + ids)[5:]  # 11 rows -> a 16-row bucket, padded rows dropped
    assert runner.stats.hits == len(ids) + 1 and runner.stats.misses == 0
    assert cosines(alone, bucketed).min() >= 0.99999
    assert cosines(alone, mixed).min() >= 0.99999

"""The made-up model behind the TEI stub (tests/fakes/tei_stub.py): fixed vectors, tokens and scores per text,
so that answers are deterministic and cheap, never a real model's.

A text's dense vector is stub_server.text_vector's pseudo-random one seeded by the text, 384-dimensional; its
tokens are its words and punctuation plus [CLS] and [SEP]; a sparse vector holds one entry per distinct word;
a rerank's raw score (a cross-encoder's logit in TEI) is RERANK_LOGIT_SCALE x the cosine of the query's and
the text's vectors.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

from loadgen.processes.stub_target import text_vector

DIMENSION = 384
SPARSE_VOCABULARY = 30522  # BERT's vocabulary, as SPLADE models have
RERANK_LOGIT_SCALE = 10.0
WORD = re.compile(r"\w+|[^\w\s]")


def text_tokens(text: str) -> int:
    """A text's tokens: words and punctuation, plus [CLS] and [SEP]."""
    return len(WORD.findall(text)) + 2


def dense_vector(text: str, normalize: bool) -> list[float]:
    vector = np.asarray(text_vector(text, DIMENSION), dtype=np.float64)
    return [float(v) for v in (vector / np.linalg.norm(vector) if normalize else vector)]


def cut(vector: list[float], dimensions: int, normalize: bool) -> list[float]:
    """The first `dimensions` components (TEI's `dimensions`), normalised again when asked."""
    head = np.asarray(vector[:dimensions])
    return [float(v) for v in (head / np.linalg.norm(head) if normalize else head)]


def sparse_vector(text: str) -> list[dict[str, Any]]:
    """One entry per distinct word, at a vocabulary index and with a weight in [1, 3) fixed by the word."""
    weights: dict[int, float] = {}
    for word in WORD.findall(text.lower()):
        index = zlib.crc32(word.encode()) % SPARSE_VOCABULARY
        weights[index] = weights.get(index, 0.0) + 1.0 + (zlib.crc32(b"#" + word.encode()) % 1000) / 500
    return [{"index": i, "value": weights[i]} for i in sorted(weights)]


def rerank_logit(query: str, text: str) -> float:
    q = np.asarray(text_vector(query, DIMENSION))
    t = np.asarray(text_vector(text, DIMENSION))
    return RERANK_LOGIT_SCALE * float(q @ t / (np.linalg.norm(q) * np.linalg.norm(t)))

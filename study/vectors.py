"""Embedding vectors: the encoder interface that produces them, unit rows and per-text cosine."""

from __future__ import annotations

from typing import Protocol, TypedDict

import numpy as np

from embedperf.errors import ConfigError


class Encoder(Protocol):
    """Anything that embeds texts: a loaded model (modelcore.model.EmbeddingModel) or a remote endpoint."""

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray: ...


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 in float64 (a zero row stays zero rather than dividing by zero)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


class CosineSummary(TypedDict):
    cosine_mean: float
    cosine_p5: float
    cosine_min: float


def cosine_summary(cosine: np.ndarray) -> CosineSummary:
    """Mean, P5 and min of per-item cosines, under the names the result models give them."""
    mean, p5, low = cosine.mean(), np.percentile(cosine, 5), cosine.min()
    return CosineSummary(cosine_mean=float(mean), cosine_p5=float(p5), cosine_min=float(low))


def cosine_per_text(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    if reference.shape != candidate.shape:
        raise ConfigError(
            f"reference embeddings {reference.shape} and candidate {candidate.shape} differ in shape; "
            "compare configurations of the same model and output dimension"
        )
    return np.asarray(np.sum(unit_rows(reference) * unit_rows(candidate), axis=1))

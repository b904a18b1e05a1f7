"""Quality probes: reference texts with stored fp32 embeddings (a Parquet file from `embedperf precision
--write-reference`), some sent during the run and the answer's cosine recorded (`probe_cosine`), so a batching
or padding bug that only shows under load is caught while it happens."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from embedperf.errors import ConfigError

REFERENCE_SCHEMA = pa.schema([("text", pa.string()), ("embedding", pa.list_(pa.float32()))])


def write_reference_set(path: Path, texts: Sequence[str], embeddings: np.ndarray, model: str) -> Path:
    """Store texts and their reference embeddings (one row each); the model name goes in the metadata."""
    if len(texts) != len(embeddings) or not len(texts):
        raise ConfigError(
            f"a reference set needs one embedding per text ({len(texts)} texts, {len(embeddings)} embeddings)"
        )
    table = pa.table(
        {"text": list(texts), "embedding": [np.asarray(v, dtype=np.float32).tolist() for v in embeddings]},
        schema=REFERENCE_SCHEMA.with_metadata({"model": model}),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


@lru_cache(maxsize=4)
def load_reference_set(path: str) -> tuple[list[str], np.ndarray]:
    """(texts, unit-length reference vectors); errors say how to make the file."""
    if not Path(path).is_file():
        raise ConfigError(
            f"payload.quality_probes.reference {path} does not exist; write one with "
            "`embedperf precision --write-reference PATH`"
        )
    table = pq.read_table(path)
    if table.schema.names[:2] != ["text", "embedding"] or not table.num_rows:
        raise ConfigError(f"{path} is not a reference set (text, embedding) or is empty")
    vectors = np.asarray(table.column("embedding").to_pylist(), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return [str(t) for t in table.column("text").to_pylist()], vectors


def answer_vectors(body: bytes) -> list[np.ndarray] | None:
    """Every embedding of an OpenAI-style answer (float lists or base64), in order; None if unreadable."""
    try:
        items = json.loads(body)["data"]
        embeddings = [item["embedding"] for item in items]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    vectors = []
    for embedding in embeddings:
        if isinstance(embedding, str):
            vectors.append(np.frombuffer(base64.b64decode(embedding), dtype=np.float32).astype(np.float64))
        elif isinstance(embedding, list):
            vectors.append(np.asarray(embedding, dtype=np.float64))
        else:
            return None
    return vectors


def answer_cosine(
    body: bytes, reference: np.ndarray, vectors_of: Callable[[bytes], list[np.ndarray] | None] = answer_vectors
) -> float | None:
    """Cosine of an answer's first embedding (`vectors_of` reads it) to a unit reference; None: unreadable."""
    vectors = vectors_of(body)
    if not vectors:
        return None
    vector = vectors[0]
    if vector.shape != reference.shape:
        return None
    norm = float(np.linalg.norm(vector))
    return float(vector @ reference / norm) if norm > 0 else 0.0

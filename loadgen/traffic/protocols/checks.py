"""Answer checks every protocol shares: dense vectors, sparse vectors and rankings, whatever their wire shape.

Each returns '' for a good answer or the reason, worded the same for every protocol, so a row's `error` reads
alike against any server (and error_kinds counts every such 200 as `invalid_answer`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from loadgen.traffic.protocols.base import Expectations


def check_vectors(vectors: Any, n_inputs: int, expect: Expectations) -> str:
    """n_inputs dense vectors of finite numbers, of the expected dimension (else learnt from this one)."""
    if not isinstance(vectors, list):
        return "answer has no list of embeddings"
    if len(vectors) != n_inputs:
        return f"wrong count: {len(vectors)} embeddings for {n_inputs} inputs"
    dim, error = one_size({len(v) if isinstance(v, list) else None for v in vectors})
    if error:
        return error
    if not _finite(vectors):
        return "embedding with a value that is not a finite number"
    return check_dim(dim, expect)


def one_size(dims: set[int | None]) -> tuple[int, str]:
    """The one dimension of an answer's vectors (None in dims: an item without one), or why there is none."""
    if None in dims:
        return 0, "answer item without an embedding"
    if len(dims) != 1:
        return 0, f"embeddings of different sizes {sorted(d for d in dims if d is not None)}"
    dim = dims.pop()
    assert dim is not None
    return dim, ""


def check_flat(data: Any, shape: Any, n_inputs: int, expect: Expectations) -> str:
    """A row-major tensor [n_inputs, dim] sent as flat data with its shape (the Open Inference Protocol)."""
    if not isinstance(shape, list) or len(shape) != 2 or not all(isinstance(s, int) for s in shape):
        return f"output shape {shape!r} is not [inputs, dimension]"
    rows, dim = shape
    if rows != n_inputs:
        return f"wrong count: {rows} embeddings for {n_inputs} inputs"
    if not isinstance(data, list) or len(data) != rows * dim:
        size = len(data) if isinstance(data, list) else "no"
        return f"output data holds {size} values; its shape {shape} needs {rows * dim}"
    if not _finite([data]):
        return "embedding with a value that is not a finite number"
    return check_dim(dim, expect)


def check_dim(dim: int, expect: Expectations) -> str:
    if expect.expected_dim is None:
        expect.learn_dim(dim)
    elif dim != expect.expected_dim:
        return f"wrong dimension: {dim}, expected {expect.expected_dim} (from {expect.dim_source})"
    return ""


def _finite(rows: list[Any]) -> bool:
    """Every value a finite number (not NaN, Infinity, null or a string)."""
    try:
        array = np.asarray(rows)
    except ValueError:
        return False
    return array.dtype.kind in "fi" and bool(np.isfinite(array).all())


def check_ranking(ranks: Sequence[tuple[Any, Any]], n_documents: int) -> str:
    """(index, score) pairs: one per document, the indices a permutation of 0..n-1, every score finite."""
    if len(ranks) != n_documents:
        return f"wrong count: {len(ranks)} scores for {n_documents} documents"
    indices = [index for index, _ in ranks]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        return "rank without an integer document index"
    if sorted(indices) != list(range(n_documents)):
        missing = sorted(set(range(n_documents)) - set(indices))
        return f"indices are not a permutation of the {n_documents} documents (missing {missing[:5]})"
    for index, score in ranks:
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            return f"document {index} has no finite score ({score!r})"
    return ""


def check_sparse(vectors: Any, n_inputs: int) -> str:
    """n_inputs sparse vectors, each a list of {"index": int >= 0, "value": finite number}."""
    if not isinstance(vectors, list):
        return "answer has no list of sparse embeddings"
    if len(vectors) != n_inputs:
        return f"wrong count: {len(vectors)} sparse embeddings for {n_inputs} inputs"
    for i, vector in enumerate(vectors):
        if not isinstance(vector, list):
            return f"sparse embedding {i} is not a list of entries"
        for entry in vector:
            index = entry.get("index") if isinstance(entry, dict) else None
            value = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                return f"sparse embedding {i}: entry without a non-negative integer index"
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                return f"sparse embedding {i}: index {index} has no finite value"
    return ""

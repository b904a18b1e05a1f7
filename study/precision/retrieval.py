"""Retrieval agreement: do the candidate's vectors find the same neighbours as fp32's (agreement@k, rank correlation)?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from embedperf.errors import ConfigError
from study.precision.gate import TOP_K
from study.vectors import unit_rows

RetrievalMode = Literal["queries_to_documents", "all_pairs"]


class RetrievalAgreement(BaseModel):
    """Per-query figures, summarised: the mean is what the gate reads, the minimum shows the worst query."""

    mode: RetrievalMode
    n_queries: int
    n_documents: int
    k: int
    agreement_mean: float
    agreement_min: float
    rank_correlation_mean: float
    rank_correlation_min: float


def _similarities(vectors: np.ndarray, queries: np.ndarray | None) -> np.ndarray:
    """(queries x documents) cosine; with no query mask every text against every other, self left out."""
    unit = unit_rows(vectors)
    if queries is not None:
        return unit[queries] @ unit[~queries].T
    sims = unit @ unit.T
    n = sims.shape[0]
    return sims[~np.eye(n, dtype=bool)].reshape(n, n - 1)


def _effective_k(k: int, n_documents: int) -> int:
    # At least one document must stay outside the top k, or every candidate agrees by construction.
    effective = min(k, n_documents - 1)
    if effective < 1:
        raise ConfigError("retrieval agreement needs at least three texts (or two documents per query)")
    return effective


def topk_agreement(
    reference: np.ndarray, candidate: np.ndarray, k: int = TOP_K, queries: np.ndarray | None = None
) -> np.ndarray:
    """Per query: |top-k(ref) ∩ top-k(cand)| / k among the documents (without a mask: the other texts)."""
    ref_sims, cand_sims = _similarities(reference, queries), _similarities(candidate, queries)
    k = _effective_k(k, ref_sims.shape[1])
    ref_nn = np.argsort(-ref_sims, axis=1, kind="stable")[:, :k]
    cand_nn = np.argsort(-cand_sims, axis=1, kind="stable")[:, :k]
    return np.array([len(set(a) & set(b)) / k for a, b in zip(ref_nn, cand_nn, strict=True)])


def rank_correlation(
    reference: np.ndarray, candidate: np.ndarray, queries: np.ndarray | None = None
) -> np.ndarray:
    """Per query: Spearman's rho between the fp32 and the candidate ranking of every document."""
    ref_sims, cand_sims = _similarities(reference, queries), _similarities(candidate, queries)

    def centred_ranks(sims: np.ndarray) -> np.ndarray:
        ranks = np.argsort(np.argsort(sims, axis=1, kind="stable"), axis=1).astype(np.float64)
        ranks -= ranks.mean(axis=1, keepdims=True)
        norms = np.linalg.norm(ranks, axis=1, keepdims=True)
        return ranks / np.where(norms == 0, 1.0, norms)

    return np.asarray(np.sum(centred_ranks(ref_sims) * centred_ranks(cand_sims), axis=1))


def query_mask(kinds: Sequence[str]) -> np.ndarray | None:
    """Texts of kind "query" against the rest when the set has both; else None (each text against the others)."""
    mask = np.array([kind == "query" for kind in kinds], dtype=bool)
    return mask if mask.any() and (~mask).sum() >= 2 else None


def retrieval_agreement(
    reference: np.ndarray, candidate: np.ndarray, kinds: Sequence[str], k: int = TOP_K
) -> RetrievalAgreement:
    queries = query_mask(kinds)
    agreement = topk_agreement(reference, candidate, k, queries)
    rho = rank_correlation(reference, candidate, queries)
    n = reference.shape[0]
    n_documents = int((~queries).sum()) if queries is not None else n - 1
    return RetrievalAgreement(
        mode="queries_to_documents" if queries is not None else "all_pairs",
        n_queries=int(queries.sum()) if queries is not None else n,
        n_documents=n_documents,
        k=_effective_k(k, n_documents),
        agreement_mean=float(agreement.mean()),
        agreement_min=float(agreement.min()),
        rank_correlation_mean=float(rho.mean()),
        rank_correlation_min=float(rho.min()),
    )

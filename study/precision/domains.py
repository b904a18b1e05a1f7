"""Agreement per domain: by language, by input-length band and by every label column, with the worst inputs.

A mean over the whole set hides a domain the configuration damages; each domain is gated on its own
mean and its P5, so a collapse on one kind of input fails even when the overall mean passes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from study.corpus import EvalText
from study.vectors import cosine_summary

# Upper bounds of the length bands in tokens (special tokens included, after truncation).
LENGTH_BANDS_TOKENS: tuple[int, ...] = (32, 128)
WORST_PER_DOMAIN = 3
TEXT_PREVIEW_CHARS = 160


class WorstInput(BaseModel):
    id: str
    cosine: float
    text: str  # the first TEXT_PREVIEW_CHARS characters


class DomainAgreement(BaseModel):
    """One group of one axis (language "zh", length "33–128 tokens", domain "commerce")."""

    axis: str
    name: str
    n: int
    cosine_mean: float
    cosine_p5: float
    cosine_min: float
    passed: bool
    worst: list[WorstInput]

    @property
    def label(self) -> str:
        return f"{self.axis}={self.name}"


def length_band(n_tokens: int) -> str:
    low = 1
    for high in LENGTH_BANDS_TOKENS:
        if n_tokens <= high:
            return f"{low}–{high} tokens"
        low = high + 1
    return f">{LENGTH_BANDS_TOKENS[-1]} tokens"


def worst_inputs(
    cosine: np.ndarray, texts: Sequence[EvalText], indexes: np.ndarray, n: int
) -> list[WorstInput]:
    """The n texts among indexes furthest from fp32, worst first (ties in corpus order)."""
    chosen = indexes[np.argsort(cosine[indexes], kind="stable")[:n]]
    return [
        WorstInput(id=texts[i].id, cosine=float(cosine[i]), text=texts[i].text[:TEXT_PREVIEW_CHARS])
        for i in chosen
    ]


def domain_groups(
    texts: Sequence[EvalText], token_counts: Sequence[int] | None, label_fields: Sequence[str]
) -> dict[str, list[str]]:
    """axis -> the group of every text, in text order: language, length band (when tokens are known), labels."""
    axes = {"language": [t.lang for t in texts]}
    if token_counts is not None:
        axes["length"] = [length_band(n) for n in token_counts]
    for name in label_fields:
        axes[name] = [t.labels.get(name, "") for t in texts]
    return axes


def domain_breakdown(
    cosine: np.ndarray,
    texts: Sequence[EvalText],
    token_counts: Sequence[int] | None,
    label_fields: Sequence[str],
    min_domain_cosine: float,
) -> list[DomainAgreement]:
    """Every group of every axis; a group passes when its mean and P5 cosine both reach min_domain_cosine."""
    out = []
    for axis, groups in domain_groups(texts, token_counts, label_fields).items():
        group_arr = np.asarray(groups)
        for name in sorted(set(groups)):
            indexes = np.flatnonzero(group_arr == name)
            figures = cosine_summary(cosine[indexes])
            passed = figures["cosine_mean"] >= min_domain_cosine and figures["cosine_p5"] >= min_domain_cosine
            worst = worst_inputs(cosine, texts, indexes, WORST_PER_DOMAIN)
            out.append(
                DomainAgreement(axis=axis, name=name, n=len(indexes), **figures, passed=passed, worst=worst)
            )
    return out

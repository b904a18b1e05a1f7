"""Precision verification: a configuration's embeddings against an fp32 reference on a fixed corpus.

Figures: cosine similarity per text (mean, min, P1) and top-k retrieval agreement (for every text
used as a query, the overlap of its k nearest neighbours under the reference and the candidate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import httpx
import numpy as np

from embedperf.errors import ConfigError, TargetError

GateProfile = Literal["standard", "strict"]
GATE_MIN_MEAN_COSINE: dict[str, float] = {"standard": 0.99, "strict": 0.999}
TOP_K = 10


class Encoder(Protocol):
    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray: ...


@dataclass
class PrecisionResult:
    """What one comparison found; `passed` applies the gate of `profile`."""

    candidate: str
    reference: str
    n_texts: int
    cosine_mean: float
    cosine_min: float
    cosine_p1: float
    topk: int
    topk_agreement_mean: float
    topk_agreement_min: float
    profile: str
    gate_min_mean_cosine: float
    passed: bool
    by_group: dict[str, dict[str, float]] = field(default_factory=dict)
    worst_ids: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def cosine_per_text(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    if reference.shape != candidate.shape:
        raise ConfigError(
            f"reference embeddings {reference.shape} and candidate {candidate.shape} differ in shape; "
            "compare configurations of the same model and output dimension"
        )
    return np.sum(_normalise(reference) * _normalise(candidate), axis=1)


def topk_agreement(reference: np.ndarray, candidate: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Per query: |top-k(ref) ∩ top-k(cand)| / k, the query itself excluded from its neighbours."""
    n = reference.shape[0]
    k = min(k, n - 1)
    if k < 1:
        raise ConfigError("top-k agreement needs at least two texts")

    def neighbours(vectors: np.ndarray) -> np.ndarray:
        unit = _normalise(vectors)
        sims = unit @ unit.T
        np.fill_diagonal(sims, -np.inf)
        return np.argsort(-sims, axis=1, kind="stable")[:, :k]

    ref_nn, cand_nn = neighbours(reference), neighbours(candidate)
    return np.array([len(set(a) & set(b)) / k for a, b in zip(ref_nn, cand_nn, strict=True)])


def compare_embeddings(
    reference: np.ndarray,
    candidate: np.ndarray,
    ids: Sequence[str],
    groups: Sequence[str],
    *,
    candidate_name: str,
    reference_name: str = "fp32",
    profile: GateProfile = "standard",
) -> PrecisionResult:
    cos = cosine_per_text(reference, candidate)
    agree = topk_agreement(reference, candidate)
    by_group: dict[str, dict[str, float]] = {}
    group_arr = np.asarray(groups)
    for group in sorted(set(groups)):
        mask = group_arr == group
        by_group[group] = {
            "n": int(mask.sum()),
            "cosine_mean": float(cos[mask].mean()),
            "cosine_min": float(cos[mask].min()),
        }
    threshold = GATE_MIN_MEAN_COSINE[profile]
    worst = np.argsort(cos, kind="stable")[:5]
    return PrecisionResult(
        candidate=candidate_name,
        reference=reference_name,
        n_texts=len(cos),
        cosine_mean=float(cos.mean()),
        cosine_min=float(cos.min()),
        cosine_p1=float(np.percentile(cos, 1)),
        topk=min(TOP_K, len(cos) - 1),
        topk_agreement_mean=float(agree.mean()),
        topk_agreement_min=float(agree.min()),
        profile=profile,
        gate_min_mean_cosine=threshold,
        passed=bool(cos.mean() >= threshold),
        by_group=by_group,
        worst_ids=[ids[i] for i in worst],
    )


class EndpointEncoder:
    """Embeddings from a running OpenAI-compatible endpoint (another build, another host)."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0
    ) -> None:
        self.url = base_url.rstrip("/") + "/v1/embeddings"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        out: list[list[float]] = []
        with httpx.Client(timeout=self.timeout_s) as client:
            for start in range(0, len(texts), batch_size):
                chunk = texts[start : start + batch_size]
                try:
                    resp = client.post(
                        self.url, json={"input": chunk, "model": self.model}, headers=self.headers
                    )
                except httpx.HTTPError as exc:
                    raise TargetError(f"cannot reach {self.url}: {exc}; is the endpoint running?") from exc
                if resp.status_code != 200:
                    raise TargetError(f"{self.url} answered {resp.status_code}: {resp.text[:300]}")
                data = sorted(resp.json()["data"], key=lambda d: d["index"])
                if len(data) != len(chunk):
                    raise TargetError(f"{self.url} returned {len(data)} embeddings for {len(chunk)} inputs")
                out.extend(d["embedding"] for d in data)
        return np.asarray(out, dtype=np.float32)


def write_result(result: PrecisionResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.to_json(), encoding="utf-8")


def read_result(path: Path) -> PrecisionResult:
    return PrecisionResult(**json.loads(path.read_text(encoding="utf-8")))

"""Precision verification: a configuration's embeddings against an fp32 reference on an evaluation set: cosine
per text and per domain, and retrieval agreement, all three read by the gate (study.precision.gate). The
result models need no torch (study/precision/layers.py computes the layer view with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel

from embedperf.files import write_atomically
from loadgen.lifecycle.preflight import normalise_base_url
from study.corpus import EvalText
from study.precision.advice_plan import Advice
from study.precision.domains import DomainAgreement, WorstInput, domain_breakdown, worst_inputs
from study.precision.gate import PrecisionGates, gate_failures
from study.precision.retrieval import RetrievalAgreement, retrieval_agreement
from study.vectors import cosine_per_text, cosine_summary
from study.verify.target import TargetClient

WORST_OVERALL = 10
EMBEDDINGS_PATH = "/v1/embeddings"
PointKind = Literal["layer", "linear"]


class LayerAgreement(BaseModel):
    """One hooked module: its output's cosine to fp32 (mean, P5, min over valid tokens of every input) and
    relative error ‖cand − ref‖ / ‖ref‖ (mean, P95, max)."""

    name: str
    kind: PointKind
    depth: int  # 1-based index of the encoder layer it belongs to
    n_tokens: int
    cosine_mean: float
    cosine_p5: float
    cosine_min: float
    rel_error_mean: float
    rel_error_p95: float
    rel_error_max: float
    drop: float  # mean cosine lost against the previous layer's output (1.0 before the first layer)


class LayerReport(BaseModel):
    gate: float
    n_texts: int
    layers: list[LayerAgreement]
    linears: list[LayerAgreement]
    first_below_gate: str | None  # the first layer whose mean cosine is below the gate
    largest_drop: str | None  # the layer that loses the most mean cosine against its input
    largest_drop_linear: str | None  # the Linear that loses the most against its layer's input


class PrecisionResult(BaseModel):
    """What one comparison found; `passed` is the whole gate, `failures` says why not. The flat topk* and
    gate_min_mean_cosine are what the run report and the matrix read from precision.json."""

    candidate: str
    reference: str
    dataset: str
    n_texts: int
    cosine_mean: float
    cosine_p5: float
    cosine_p1: float
    cosine_min: float
    topk: int
    topk_agreement_mean: float
    topk_agreement_min: float
    retrieval: RetrievalAgreement
    profile: str
    gate_min_mean_cosine: float
    gates: PrecisionGates
    passed: bool
    failures: list[str]
    domains: list[DomainAgreement]
    worst: list[WorstInput]
    layers: LayerReport | None = None
    advice: Advice | None = None

    @property
    def failing_domains(self) -> list[DomainAgreement]:
        return [d for d in self.domains if not d.passed]


def compare_embeddings(
    reference: np.ndarray,
    candidate: np.ndarray,
    texts: Sequence[EvalText],
    *,
    candidate_name: str,
    gates: PrecisionGates,
    label_fields: Sequence[str] = (),
    token_counts: Sequence[int] | None = None,
    dataset: str = "shipped evaluation corpus",
) -> PrecisionResult:
    """Every figure and the verdict of one candidate; without token_counts there is no length breakdown."""
    cos = cosine_per_text(reference, candidate)
    retrieval = retrieval_agreement(reference, candidate, [t.kind for t in texts], gates.topk)
    domains = domain_breakdown(cos, texts, token_counts, label_fields, gates.min_domain_cosine)
    failing = [d.label for d in domains if not d.passed]
    failures = gate_failures(gates, float(cos.mean()), failing, retrieval.agreement_mean, retrieval.k)
    return PrecisionResult(
        candidate=candidate_name, reference="fp32", dataset=dataset, n_texts=len(cos),
        **cosine_summary(cos), cosine_p1=float(np.percentile(cos, 1)),
        retrieval=retrieval, topk=retrieval.k,
        topk_agreement_mean=retrieval.agreement_mean, topk_agreement_min=retrieval.agreement_min,
        gates=gates, profile=gates.profile, gate_min_mean_cosine=gates.min_mean_cosine,
        passed=not failures, failures=failures, domains=domains,
        worst=worst_inputs(cos, texts, np.arange(len(cos)), WORST_OVERALL),
    )


class EndpointEncoder(TargetClient):
    """Embeddings from a running OpenAI-compatible endpoint (another build, another host)."""

    def __init__(self, base_url: str, model: str, api_key_env: str = "EMBEDPERF_TARGET_API_KEY") -> None:
        super().__init__(normalise_base_url(base_url, EMBEDDINGS_PATH), model, api_key_env)
        self.url = self.base_url + EMBEDDINGS_PATH


def write_result(result: PrecisionResult, path: Path) -> Path:
    return write_atomically(path, result.model_dump_json(indent=2))


def read_result(path: Path) -> PrecisionResult:
    return PrecisionResult.model_validate_json(path.read_text(encoding="utf-8"))

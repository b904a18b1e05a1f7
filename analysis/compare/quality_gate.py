"""Quality probes per step against the precision gate: a step whose answers drift from fp32 is flagged."""

from __future__ import annotations

from pydantic import BaseModel

from analysis.run.summary import RunSummary
from embedperf.schema import Manifest


class QualityStep(BaseModel):
    label: str
    n_probes: int
    cosine_mean: float
    cosine_min: float
    below_gate: bool


class QualityGate(BaseModel):
    min_cosine: float
    steps: list[QualityStep]

    @property
    def failed(self) -> list[str]:
        return [s.label for s in self.steps if s.below_gate]


def quality_gate(summary: RunSummary, manifest: Manifest) -> QualityGate | None:
    """None for runs without quality probes (or without an answered one)."""
    probes = manifest.scenario.payload.quality_probes
    if probes is None:
        return None
    steps = [
        QualityStep(
            label=s.label, n_probes=s.n_quality_probes, cosine_mean=s.quality_cosine_mean,
            cosine_min=s.quality_cosine_min if s.quality_cosine_min is not None else s.quality_cosine_mean,
            below_gate=s.quality_cosine_mean < probes.min_cosine,
        )
        for s in (step.stats for step in summary.steps)
        if s.quality_cosine_mean is not None
    ]
    return QualityGate(min_cosine=probes.min_cosine, steps=steps) if steps else None

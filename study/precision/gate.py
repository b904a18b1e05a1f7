"""The precision gate: its thresholds (typed, validated once) and the one function that decides pass/fail."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GateProfile = Literal["standard", "strict"]
TOP_K = 10
# profile -> (mean cosine, every domain's mean and P5, mean agreement@10). A domain gate bounds a
# subgroup and a tail, so it sits one step below the mean gate: a domain may drift twice as far from
# fp32 as the whole set may on average, no further.
PROFILE_DEFAULTS: dict[str, tuple[float, float, float]] = {
    "standard": (0.99, 0.98, 0.95),
    "strict": (0.999, 0.998, 0.98),
}


class PrecisionGates(BaseModel):
    """What a configuration must keep to pass: the embeddings, every domain of the set, the neighbours."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: GateProfile = Field(default="standard", description="the profile the defaults came from")
    min_mean_cosine: float = Field(gt=0.0, le=1.0, description="mean cosine to fp32 over every text")
    min_domain_cosine: float = Field(
        gt=0.0, le=1.0, description="each language, length band and label: its mean and its P5 cosine"
    )
    min_topk_agreement: float = Field(
        gt=0.0, le=1.0, description="mean overlap of each query's top-k neighbours, fp32 vs candidate"
    )
    topk: int = Field(default=TOP_K, ge=1, description="k of the retrieval agreement")

    @classmethod
    def for_profile(
        cls,
        profile: GateProfile = "standard",
        min_domain_cosine: float | None = None,
        min_topk_agreement: float | None = None,
    ) -> PrecisionGates:
        mean, domain, topk = PROFILE_DEFAULTS[profile]
        return cls(
            profile=profile,
            min_mean_cosine=mean,
            min_domain_cosine=domain if min_domain_cosine is None else min_domain_cosine,
            min_topk_agreement=topk if min_topk_agreement is None else min_topk_agreement,
        )


def gate_failures(
    gates: PrecisionGates,
    cosine_mean: float,
    failing_domains: list[str],
    topk_agreement_mean: float,
    k: int | None = None,
) -> list[str]:
    """Every reason the configuration fails, one line each; empty when it passes. k is the agreement's
    effective k (a set with few documents ranks fewer than gates.topk)."""
    failures = []
    if cosine_mean < gates.min_mean_cosine:
        failures.append(f"mean cosine {cosine_mean:.6f} is below {gates.min_mean_cosine}")
    if failing_domains:
        failures.append(
            f"{len(failing_domains)} domain(s) with mean or P5 cosine below {gates.min_domain_cosine}: "
            + ", ".join(failing_domains)
        )
    if topk_agreement_mean < gates.min_topk_agreement:
        failures.append(
            f"agreement@{k or gates.topk} {topk_agreement_mean:.3f} is below {gates.min_topk_agreement}: "
            "the candidate finds other neighbours than fp32"
        )
    return failures

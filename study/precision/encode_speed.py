"""Offline encode throughput of several variants on the same batch set, in interleaved rounds.

Not a load test: the order rotates every round so that drift on a busy host is shared out; the ratio to fp32
carries over to another host, the absolute texts/s does not.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping

from pydantic import BaseModel

from study.vectors import Encoder

ENCODE_BATCH_SIZE = 32
BASELINE = "fp32"


class SpeedFigure(BaseModel):
    variant: str
    texts_per_s: float  # median over rounds
    round_s: list[float]  # seconds of each round, in round order
    ratio_to_fp32: float


def method_text(n_texts: int, rounds: int) -> str:
    return (
        f"offline encode of the same {n_texts} texts (batches of {ENCODE_BATCH_SIZE}, sorted by length), "
        f"{rounds} interleaved round(s), median; the ratio to fp32 carries over, texts/s is this host's"
    )


def measure_speed(variants: Mapping[str, Encoder], texts: list[str], rounds: int) -> list[SpeedFigure]:
    """texts/s of every variant (a key must be "fp32": the ratios are to it)."""
    if BASELINE not in variants:
        raise ValueError(f"measure_speed needs a {BASELINE!r} variant for the ratios")
    names = list(variants)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            start = time.perf_counter()
            variants[name].encode(texts, batch_size=ENCODE_BATCH_SIZE)
            seconds[name].append(time.perf_counter() - start)
    rate = {name: len(texts) / statistics.median(values) for name, values in seconds.items()}
    return [
        SpeedFigure(
            variant=name,
            texts_per_s=rate[name],
            round_s=seconds[name],
            ratio_to_fp32=rate[name] / rate[BASELINE],
        )
        for name in names
    ]

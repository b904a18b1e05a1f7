"""The matrix's cheapest configuration: the lowest cost per million embeddings at the SLO (analysis.figures.cost,
the median over repeats). Only priced runs (a `cost` block in the overrides) that pass the precision gate compete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from analysis.run.summary import RunAnalysis


class Configuration(Protocol):
    """What the matrix report's ConfigRow offers this module."""

    name: str
    runs: list[RunAnalysis]

    @property
    def precision_ok(self) -> bool: ...

    @property
    def qps_at_slo(self) -> float | None: ...


@dataclass(frozen=True)
class Cheapest:
    name: str
    per_1m_embeddings: float
    currency: str
    qps_at_slo: float | None


def cost_at_slo(row: Configuration) -> tuple[float, str] | None:
    """Median cost per million embeddings at the capacity step over the repeats, and its currency."""
    values, currencies = [], set()
    for run in row.runs:
        cost, index = run.summary.cost, run.summary.capacity.max_step_index
        step = cost.step(index) if cost is not None and index is not None else None
        if cost is None or step is None or step.per_1m_embeddings is None:
            return None
        values.append(step.per_1m_embeddings)
        currencies.add(cost.prices.currency)
    if not values or len(currencies) != 1:
        return None
    return float(np.median(values)), currencies.pop()


def cheapest(rows: list[Configuration]) -> Cheapest | None:
    """The eligible configuration meeting the SLO with the lowest cost per million embeddings."""
    priced = [
        (row, c) for row in rows if row.runs and row.precision_ok and (c := cost_at_slo(row)) is not None
    ]
    if not priced or len({c[1] for _, c in priced}) != 1:
        return None
    row, (per_1m, currency) = min(priced, key=lambda item: item[1][0])
    return Cheapest(name=row.name, per_1m_embeddings=per_1m, currency=currency, qps_at_slo=row.qps_at_slo)

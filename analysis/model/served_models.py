"""Which model answered: ok requests per served model (X-Served-Model) and the share the fallback served.

A target that degrades to a lighter model under load names the model of each answer; a step whose
answers partly came from the fallback measured a different product, and the report flags it. Counted
over the steady, ok rows of DuckDB's `prepared` view (analysis/engine/requests.py), probes left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


def ordered(counts: dict[str, int]) -> dict[str, int]:
    """Most frequent model first, then by name: one order for both engines."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def served_model_counts_by_stage(con: duckdb.DuckDBPyConnection) -> dict[int, dict[str, int]]:
    """served_model_counts for every step in one grouped scan of the `prepared` view."""
    rows = con.execute(
        "SELECT stage, served_model, count(*) FROM prepared "
        "WHERE NOT probe AND outcome = 0 AND served_model IS NOT NULL GROUP BY ALL"
    ).fetchall()
    by_stage: dict[int, dict[str, int]] = {}
    for stage, model, n in rows:
        by_stage.setdefault(int(stage), {})[str(model)] = int(n)
    return {stage: ordered(counts) for stage, counts in by_stage.items()}


def served_fields(counts: dict[str, int], fallback_model: str | None) -> dict[str, Any]:
    """StepStats' served_models and fallback_share: the share of the ok requests that named a model; None
    when none did (no header sent, or a folder older than the column) or /info declared no fallback."""
    named = sum(counts.values())
    share = counts.get(fallback_model, 0) / named if fallback_model and named else None
    return {"served_models": counts, "fallback_share": share}

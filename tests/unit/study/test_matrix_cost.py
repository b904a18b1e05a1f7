"""The matrix names the configuration with the lowest cost per million embeddings at the SLO."""

from __future__ import annotations

from pathlib import Path

from analysis.run.analyse import analyse_folder
from study.matrix.report import ConfigRow, cheapest, cost_at_slo
from tests.unit.analysis.test_analysis_cost import priced_run


def _row(
    name: str, folder_root: Path, prices: dict[str, object] | None, slower: int = 1, **extra: object
) -> ConfigRow:
    run = analyse_folder(priced_run(folder_root / name, prices, slower=slower))
    return ConfigRow(
        name=name, description="", service_args=[], runs=[run], precision=None, is_baseline=False, **extra
    )  # type: ignore[arg-type]


def test_the_cheapest_configuration_is_not_always_the_fastest(tmp_path: Path) -> None:
    fast = _row("fast-gpu", tmp_path, {"device_hour": {"cuda": 3.0}})
    cheap = _row("slow-cheap-gpu", tmp_path, {"device_hour": {"cuda": 1.0}}, slower=2)
    best = cheapest([fast, cheap])
    assert best is not None and best.name == "slow-cheap-gpu" and best.currency == "USD"
    fast_cost = cost_at_slo(fast)
    assert fast_cost is not None and best.per_1m_embeddings < fast_cost[0]


def test_no_prices_or_a_failed_precision_gate_names_no_cheapest(tmp_path: Path) -> None:
    assert cheapest([_row("bare", tmp_path, None)]) is None
    wrong = _row("wrong", tmp_path, {"device_hour": {"cuda": 0.1}}, needs_precision_check=True)
    right = _row("right", tmp_path, {"device_hour": {"cuda": 3.0}})
    best = cheapest([wrong, right])
    assert best is not None and best.name == "right"

"""The run report shows cost per step and the plan's monthly cost in both languages, and nothing without prices."""

from __future__ import annotations

from pathlib import Path

from reports.build import build_report
from scenarios.cost_models import Cost
from tests.unit.analysis.test_analysis_cost import PRICES, priced_run


def test_a_priced_run_reports_cost_per_step_and_the_monthly_plan(tmp_path: Path) -> None:
    folder = priced_run(tmp_path / "run", PRICES)
    html = build_report(folder).read_text(encoding="utf-8")
    assert 'id="cost"' in html and 'id="cost-plan"' in html and 'id="headline-cost"' in html
    assert "Cost per 1M embeddings" in html and "EUR" in html
    zh = build_report(folder, lang="zh").read_text(encoding="utf-8")
    assert "每百万向量成本" in zh and "月成本" in zh


def test_an_unpriced_run_shows_no_cost_until_prices_are_given(tmp_path: Path) -> None:
    folder = priced_run(tmp_path / "run", None)
    assert 'id="cost"' not in build_report(folder).read_text(encoding="utf-8")
    html = build_report(folder, cost=Cost(device_hour={"cuda": 2.0})).read_text(encoding="utf-8")
    assert 'id="cost"' in html and "command&#39;s options" in html

"""README's lists of shipped scenarios and gate metrics name every one the code has."""

from __future__ import annotations

import re
from pathlib import Path

from analysis.compare.gate import GATE_METRICS
from scenarios.loader import shipped_scenarios

README = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8").split())


def _names(after: str, until: str) -> list[str]:
    start = README.index(after)
    return re.findall(r"`([a-z0-9_]+)`", README[start : README.index(until, start)])


def test_the_scenario_list_names_every_shipped_scenario() -> None:
    listed = _names("Scenarios live in `scenarios/*.yaml` (", ")")
    assert sorted(listed) == sorted(shipped_scenarios())


def test_the_gate_metric_list_names_every_gate_metric() -> None:
    listed = _names("or absolute `METRIC:+N`; metrics", ")")
    assert sorted(listed) == sorted(GATE_METRICS)

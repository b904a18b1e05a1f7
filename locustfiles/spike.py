"""Spike: baseline, burst, baseline (scenarios/spike.yaml)."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import EmbeddingUser
from reports.live import build_run_report

install(default_scenario="spike", report_builder=build_run_report)

__all__ = ["EmbeddingUser", "ScenarioShape"]

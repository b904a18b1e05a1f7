"""Soak: a fixed closed-loop load for a long time (scenarios/soak.yaml)."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import EmbeddingUser
from reports.live import build_run_report

install(default_scenario="soak", report_builder=build_run_report)

__all__ = ["EmbeddingUser", "ScenarioShape"]

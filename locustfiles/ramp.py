"""Closed-loop step ramp (users 1 -> 10 -> 50 -> 100): `locust -f locustfiles/ramp.py [--headless] [--scenario NAME|PATH]`."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import EmbeddingUser
from reports.live import build_run_report

install(default_scenario="ramp", report_builder=build_run_report)

__all__ = ["EmbeddingUser", "ScenarioShape"]

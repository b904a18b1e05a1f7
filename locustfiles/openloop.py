"""Open-loop load: stepped arrival rates (constant or Poisson), latency also from the intended start."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import OpenLoopUser
from reports.live import build_run_report

install(default_scenario="openloop", report_builder=build_run_report)

__all__ = ["OpenLoopUser", "ScenarioShape"]

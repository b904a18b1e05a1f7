"""Open-loop load: stepped arrival rates (constant or Poisson), latency also from the intended start."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import OpenLoopUser

install(default_scenario="openloop")

__all__ = ["OpenLoopUser", "ScenarioShape"]

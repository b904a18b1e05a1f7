"""Open-loop load: stepped arrival rates (constant or Poisson), latency also from the intended start."""

from loadgen.plugin import install
from loadgen.shapes import ScenarioShape
from loadgen.users import OpenLoopUser

install(default_scenario="openloop")

__all__ = ["OpenLoopUser", "ScenarioShape"]

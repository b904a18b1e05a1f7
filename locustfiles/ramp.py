"""Closed-loop step ramp (users 1 -> 10 -> 50 -> 100): `locust -f locustfiles/ramp.py [--headless] [--scenario NAME|PATH]`."""

from loadgen.plugin import install
from loadgen.shapes import ScenarioShape
from loadgen.users import EmbeddingUser

install(default_scenario="ramp")

__all__ = ["EmbeddingUser", "ScenarioShape"]

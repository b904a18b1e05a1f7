"""Spike: baseline, burst, baseline (scenarios/spike.yaml)."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import EmbeddingUser

install(default_scenario="spike")

__all__ = ["EmbeddingUser", "ScenarioShape"]

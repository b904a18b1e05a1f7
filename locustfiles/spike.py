"""Spike: baseline, burst, baseline (scenarios/spike.yaml)."""

from loadgen.plugin import install
from loadgen.shapes import ScenarioShape
from loadgen.users import EmbeddingUser

install(default_scenario="spike")

__all__ = ["EmbeddingUser", "ScenarioShape"]

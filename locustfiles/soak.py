"""Soak: a fixed closed-loop load for a long time (scenarios/soak.yaml)."""

from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape
from loadgen.wiring.users import EmbeddingUser

install(default_scenario="soak")

__all__ = ["EmbeddingUser", "ScenarioShape"]

"""Soak: a fixed closed-loop load for a long time (scenarios/soak.yaml)."""

from loadgen.plugin import install
from loadgen.shapes import ScenarioShape
from loadgen.users import EmbeddingUser

install(default_scenario="soak")

__all__ = ["EmbeddingUser", "ScenarioShape"]

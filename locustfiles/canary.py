"""Canary, closed loop: one load split between --host (baseline) and a candidate; run it with `embedperf canary`."""

from loadgen.wiring.canary import CanaryShape, install_canary
from loadgen.wiring.canary_users import CanaryUser
from loadgen.wiring.plugin import install

install(default_scenario="ramp")
install_canary()

__all__ = ["CanaryShape", "CanaryUser"]

"""Canary, closed loop: one load split between --host (baseline) and a candidate; run it with `embedperf canary`."""

from loadgen.wiring.canary import CanaryShape, install_canary
from loadgen.wiring.canary_users import CanaryUser
from loadgen.wiring.plugin import install
from reports.live import build_run_report

install(default_scenario="ramp", report_builder=build_run_report)
install_canary()

__all__ = ["CanaryShape", "CanaryUser"]

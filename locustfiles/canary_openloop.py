"""Canary, open loop: one arrival schedule split between --host (baseline) and a candidate (`embedperf canary`)."""

from loadgen.wiring.canary import CanaryShape, install_canary
from loadgen.wiring.canary_users import CanaryOpenLoopUser
from loadgen.wiring.plugin import install
from reports.live import build_run_report

install(default_scenario="openloop", report_builder=build_run_report)
install_canary()

__all__ = ["CanaryOpenLoopUser", "CanaryShape"]

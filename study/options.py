"""Option groups the study commands share, each spelt, defaulted and documented once."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from embedperf.options import add_shared_option
from scenarios.loader import PROFILES, add_override_option


def add_run_options(parser: argparse.ArgumentParser, label: str) -> None:
    """The run a command starts: where its folder goes, its label, the scenario profile and overrides,
    and what it records besides the rows (telemetry, report.html)."""
    group = parser.add_argument_group("run folder")
    add_shared_option(group, "runs_dir", Path("runs"), "runs")
    group.add_argument("--label", default=label, help=f"label appended to the run id (default {label})")
    group.add_argument("--profile", choices=PROFILES, default=None, help="scenario profile")
    add_override_option(parser)
    group.add_argument("--no-collectors", action="store_true", help="do not sample telemetry")
    group.add_argument("--no-report", action="store_true", help="do not build report.html")


def add_verdict_outputs(parser: argparse.ArgumentParser) -> None:
    """The verdict in the forms a CI pipeline reads, beside the console and the report."""
    group = parser.add_argument_group("verdict files")
    group.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the verdict as JSON")
    group.add_argument("--junit", type=Path, default=None, metavar="FILE", help="also write JUnit XML")


def flag_values(args: argparse.Namespace, fields: Mapping[str, str]) -> dict[str, str]:
    """The flags given (not None) as {field: text}, for the flags that set one field each."""
    return {field: str(value) for flag, field in fields.items() if (value := getattr(args, flag)) is not None}

"""Option groups the study commands share, each spelt, defaulted and documented once."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from embedperf.options import add_shared_option
from scenarios.loader import PROFILES, add_override_option


class FieldFlag(NamedTuple):
    """A flag that sets one field when given (absent: the field keeps its own value)."""

    flag: str
    type: Callable[[str], Any]
    help: str
    metavar: str | None = None
    field: str | None = None  # the field's name within its section, when it is not the flag's

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


def add_field_flags(parser: argparse._ActionsContainer, flags: Iterable[FieldFlag], title: str = "") -> None:
    group = parser.add_argument_group(title) if title else parser
    for f in flags:
        group.add_argument(f.flag, type=f.type, metavar=f.metavar, help=f.help)


def field_names(section: str, flags: Iterable[FieldFlag]) -> dict[str, str]:
    """{flag dest: section + field name}, as flag_values reads them."""
    return {f.dest: section + (f.field or f.dest) for f in flags}


def flag_values(args: argparse.Namespace, fields: Mapping[str, str]) -> dict[str, str]:
    """The flags given (not None) as {field: text}, for the flags that set one field each."""
    return {field: str(value) for flag, field in fields.items() if (value := getattr(args, flag)) is not None}


def study_parser(prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """A study command's parser; its epilog (examples, exit codes) keeps its own line breaks."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_run_options(parser: argparse.ArgumentParser, label: str) -> None:
    """The run a command starts: its folder, label, profile, overrides and what it records besides rows."""
    group = parser.add_argument_group("run folder")
    add_shared_option(group, "runs_dir", Path("runs"), "runs")
    group.add_argument("--label", default=label, help=f"label appended to the run id (default {label})")
    group.add_argument("--profile", choices=PROFILES, help="scenario profile")
    add_override_option(parser)
    group.add_argument("--no-collectors", action="store_true", help="do not sample telemetry")
    group.add_argument("--no-report", action="store_true", help="do not build report.html")


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """What add_run_options read, as run_scenario's keywords."""
    return dict(
        runs_dir=args.runs_dir, label=args.label, profile=args.profile, collectors=not args.no_collectors
    )


def add_verdict_outputs(parser: argparse.ArgumentParser) -> None:
    """The verdict in the forms a CI pipeline reads, beside the console and the report."""
    group = parser.add_argument_group("verdict files")
    group.add_argument("--json", type=Path, metavar="FILE", help="also write the verdict as JSON")
    group.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")

"""The study commands that start a run share one spelling of its options (study.options)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from study.bench.search import FLAG_FIELDS
from study.bench.search import build_parser as search_parser
from study.canary.cli import build_parser as canary_parser
from study.options import flag_values

RUN_OPTIONS = ["--runs-dir", "--label", "--profile", "--no-collectors", "--no-report"]


def _run_group(parser: argparse.ArgumentParser) -> list[str]:
    """The options listed under the help's "run folder:" heading."""
    section = parser.format_help().split("\nrun folder:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  (--[\w-]+)", section, flags=re.M)


def test_search_and_canary_take_the_same_run_options_with_their_own_label() -> None:
    search, canary = search_parser(), canary_parser()
    assert _run_group(search) == _run_group(canary) == RUN_OPTIONS
    args = search.parse_args(["--runs-dir", "out", "--set", "a=1"])
    assert (args.runs_dir, args.label, args.overrides, args.no_report) == (Path("out"), "search", ["a=1"], False)
    required = ["--baseline", "http://b", "--candidate", "http://c", "--json", "v.json"]
    assert canary.parse_args(required).label == "canary" and canary.parse_args(required).json == Path("v.json")


def test_flag_values_keep_only_the_flags_given() -> None:
    args = search_parser().parse_args(["--slo-p99-ms", "250", "--arrival", "poisson"])
    assert flag_values(args, FLAG_FIELDS) == {"slo.p99_ms": "250.0", "open_loop.arrival": "poisson"}

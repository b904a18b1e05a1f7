"""`embedperf compare`: baseline vs candidate runs -> comparison HTML (+ JSON / JUnit for CI).

Exit codes: 0 every candidate passes; 1 a gate rule (or the error budget) failed; 2 no verdict
(loads that do not match, a step without ok requests, steps too short for the statistic; with or
without --gate) or a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.compare.changes import Comparison
from analysis.compare.gate import GATE_METRICS, parse_gate
from embedperf.errors import ConfigError, GateFailed, GateInconclusive
from embedperf.options import add_shared_option
from embedperf.schema import open_run_folder
from reports.ci_outputs import write_json, write_junit
from reports.compare_build import build_comparison
from reports.i18n import VERDICT_TEXT
from scenarios.cost_options import add_cost_options, cost_from_options

DESCRIPTION = (
    "Compare candidate runs against a baseline run. Overall is the comparison at the highest load both runs "
    "share. Exit codes: 0 pass; 1 a gate rule or the error budget failed; 2 no verdict (loads that do not "
    "match, a step without ok requests, steps too short for the statistic; with or without --gate) or a "
    "usage error."
)
GATE_HELP = (
    "comma-separated rules METRIC:+N%% | METRIC:-N%% | METRIC:+N | METRIC:-N. '+' fails when the candidate "
    "rises by more than N, '-' when it falls by more than N; with %% N is relative to the baseline, without "
    "it N is absolute in the metric's unit (error_rate: percentage points). Example: "
    "'p99_ms:+5%%,qps:-3%%,error_rate:+0.1' fails if P99 rises more than 5%%, goodput drops more than 3%%, or "
    "the error rate rises more than 0.1 percentage points, at any step matched by load. A rule "
    "fails only when the point estimate crosses the threshold AND the 95%% bootstrap confidence interval of "
    "the change excludes zero. The error budget is always checked, with or without --gate. Metrics: "
    + ", ".join(GATE_METRICS)
)


def verdict_line(status: str, n_failed: int) -> str:
    """The comparison's verdict in words, printed before any detail."""
    return VERDICT_TEXT[status][0] + (f" ({n_failed} failed rule(s) and step(s), below)" if n_failed else "")


def warning_lines(comparison: Comparison) -> list[str]:
    """Changes without a verdict, counted, each distinct reason once with the metrics and steps it hit
    (one line per metric and step buried the verdict under dozens of warnings)."""
    where: dict[str, list[str]] = {}
    total = 0
    for cand in comparison.candidates:
        for step in cand.steps:
            for m in step.metrics.values():
                if m.warning:
                    total += 1
                    who = f"{cand.label}:" if len(comparison.candidates) > 1 else ""
                    where.setdefault(m.warning, []).append(f"{who}{m.metric}@{step.label}")
    if not total:
        return []
    lines = [f"{total} warning(s): changes without a verdict, {len(where)} distinct reason(s):"]
    return lines + [f"  {text}: {', '.join(dict.fromkeys(hits))}" for text, hits in where.items()]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="embedperf compare", description=DESCRIPTION)
    parser.add_argument("base_run", type=Path, help="baseline run folder")
    parser.add_argument("cand_runs", type=Path, nargs="+", help="candidate run folder(s)")
    parser.add_argument("--gate", default=None, help=GATE_HELP)
    add_shared_option(parser, "error_budget_pct", default_text="each candidate's slo.error_budget_pct")
    parser.add_argument("--out", type=Path, help="output HTML (default CAND/compare-<base_id>.html)")
    ci_files = (("--json", "the verdict as JSON"), ("--junit", "JUnit XML (one test case per rule and step)"))
    for flag, what in ci_files:
        parser.add_argument(flag, type=Path, metavar="FILE", help=f"also write {what}")
    add_shared_option(parser, "lang", "en")
    add_cost_options(parser, after_the_fact=True)
    args = parser.parse_args(argv)
    budget = None if args.error_budget_pct is None else args.error_budget_pct / 100.0
    rules = parse_gate(args.gate) if args.gate else None
    base = open_run_folder(args.base_run)
    candidates = [open_run_folder(p) for p in args.cand_runs]
    for path in (args.json, args.junit):
        if path is not None and path.is_dir():
            raise ConfigError(f"{path} is a directory; pass a file path for --json / --junit")
    path, comparison = build_comparison(
        base, candidates, rules, lang=args.lang, out=args.out, error_budget=budget,
        cost=cost_from_options(args),
    )
    print(path)
    if args.json is not None:
        print(write_json(args.json, comparison, path))
    if args.junit is not None:
        print(write_junit(args.junit, comparison))
    failed = [f"{c.label}: {line}" for c in comparison.candidates for line in c.failures]
    undecided = [c for c in comparison.candidates if c.status == "no_verdict"]
    print(f"embedperf compare: verdict: {verdict_line(comparison.status, len(failed))}", file=sys.stderr)
    for cand in undecided:
        for reason in cand.no_verdict_reasons:
            print(f"embedperf compare: no verdict: {cand.label}: {reason}", file=sys.stderr)
    if comparison.status == "fail":
        for line in failed[1:]:
            print(f"embedperf compare: gate failed: {line}", file=sys.stderr)
    for line in warning_lines(comparison):
        print(f"embedperf compare: {line}", file=sys.stderr)
    if comparison.status == "fail":
        raise GateFailed(
            f"gate failed: {failed[0]}" + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else "")
        )
    if comparison.status == "no_verdict":
        raise GateInconclusive(
            f"no verdict for {', '.join(c.label for c in undecided)} (reasons above): compare runs of the "
            "same scenario, each step held long enough (e.g. --set steps.duration_s=30) and with ok requests"
        )
    return 0

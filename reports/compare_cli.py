"""`embedperf compare`: baseline vs candidate runs -> comparison HTML, exit 1 when the gate fails."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.gate import GATE_METRICS, parse_gate
from embedperf.errors import GateFailed
from embedperf.schema import open_run_folder
from reports.compare_build import build_comparison
from reports.i18n import LANGS

GATE_HELP = (
    "comma-separated rules METRIC:+N%% | METRIC:-N%% | METRIC:+N | METRIC:-N. '+' fails when the candidate "
    "rises by more than N, '-' when it falls by more than N; with %% N is relative to the baseline, without "
    "it N is absolute in the metric's unit (error_rate: percentage points). Example: "
    "'p99_ms:+5%%,qps:-3%%,error_rate:+0.1' fails if P99 rises more than 5%%, QPS drops more than 3%%, or "
    "the error rate rises more than 0.1 percentage points, at any matched step or overall. A rule fails only "
    "when the point estimate crosses the threshold AND the 95%% bootstrap confidence interval of the change "
    "excludes zero. Metrics: " + ", ".join(GATE_METRICS)
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="embedperf compare",
        description="Compare candidate runs against a baseline run; exit code 1 when --gate fails.",
    )
    parser.add_argument("base_run", type=Path, help="baseline run folder")
    parser.add_argument("cand_runs", type=Path, nargs="+", help="candidate run folder(s)")
    parser.add_argument("--gate", default=None, help=GATE_HELP)
    parser.add_argument(
        "--out", type=Path, default=None, help="output HTML (default CAND/compare-<base_id>.html)"
    )
    parser.add_argument("--lang", choices=LANGS, default="en", help="report language (default en)")
    args = parser.parse_args(argv)
    rules = parse_gate(args.gate) if args.gate else None
    base = open_run_folder(args.base_run)
    candidates = [open_run_folder(p) for p in args.cand_runs]
    path, comparison = build_comparison(base, candidates, rules, lang=args.lang, out=args.out)
    print(path)
    if comparison.gate_failed:
        failed = [
            f"{c.label}: {g.rule} at {g.scope}" for c in comparison.candidates for g in c.gate if g.failed
        ]
        raise GateFailed("gate failed: " + "; ".join(failed) + f" (see {path})")
    return 0

"""`embedperf sweep`: the request-shape grid, inputs per request x users (x text length), each cell a short
adaptive step; writes <runs-dir>/<time>-sweep-<scenario>/ with sweep.json, one run folder per request shape,
summary.json (the table and the best cell under the SLO) and sweep.html (heatmaps and table).

Exit codes: 0 some cell meets the SLO; 1 none does; 2 a usage error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from embedperf.errors import ConfigError
from embedperf.options import add_shared_option
from loadgen.processes.service_proc import RAMP_SERVICE_ARGS, ServiceProcess
from scenarios.loader import add_override_option, load_scenario, parse_overrides
from scenarios.until_models import Until
from study.options import study_parser
from study.sweep.report import SUMMARY_FILE, SweepTable, build_sweep_report
from study.sweep.runner import check_spec, run_sweep
from study.sweep.spec import SweepSpec

EPILOG = """\
examples:
  embedperf sweep --serve                                    # the reference service, 1/4/16/64 inputs x 1/4/16 users
  embedperf sweep --host http://10.0.0.5:8080 --protocol tei --inputs 1,8,32 --users 1,8,32 --tokens 64,256
  embedperf sweep --report-only runs/<sweep folder>          # rebuild summary.json and sweep.html

Every protocol that sends several inputs per request works (openai, vllm, infinity, tei, kserve-v2, ollama).
"""


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers (e.g. 1,4,16)"
        ) from exc


def build_parser() -> argparse.ArgumentParser:
    parser = study_parser(
        "embedperf sweep",
        "Request-shape grid: inputs per request x users (x tokens per input), each cell a short adaptive step; "
        "heatmaps of embeddings/s and P99 with the best cell under the SLO. Exit 0: a cell meets the SLO; 1: none; 2: usage.",
        EPILOG,
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--host", help="target base URL (default: the scenario's target.base_url)")
    target.add_argument(
        "--serve", action="store_true", help="start the reference service for the sweep, stop it after"
    )
    target.add_argument("--report-only", type=Path, metavar="SWEEP_DIR", help="rebuild a sweep's report")
    parser.add_argument(
        "--scenario", default="ramp", help="closed-loop scenario the cells use (default ramp)"
    )
    for flag, type_, default, metavar, help_text in (
        ("--inputs", _ints, [1, 4, 16, 64], "N,N,..", "inputs per request (default 1,4,16,64)"),
        ("--users", _ints, [1, 4, 16], "U,U,..", "concurrent users (default 1,4,16)"),
        ("--tokens", _ints, [], "T,T,..", "tokens per input, one grid each (default: the scenario's texts)"),
        ("--step-max-s", float, 30.0, "S", "a cell's longest time (default 30)"),
        ("--warmup-s", float, 2.0, "S", "trimmed warm-up of each cell (default 2)"),
        (
            "--p99-rel-width",
            float,
            0.25,
            "W",
            "a cell stops once its P99 interval is this narrow (default 0.25)",
        ),
    ):
        parser.add_argument(flag, type=type_, default=default, metavar=metavar, help=help_text)
    add_shared_option(parser, "slo_p99_ms", default_text="the scenario's slo.p99_ms")
    add_shared_option(parser, "runs_dir", Path("runs"), "runs")
    add_shared_option(parser, "lang", "en")
    add_override_option(parser, "scenario override for every run, e.g. target.protocol=tei (repeatable)")
    return parser


def _spec(args: argparse.Namespace) -> SweepSpec:
    try:
        return SweepSpec(
            scenario=args.scenario, inputs=args.inputs, users=args.users, tokens=args.tokens,
            step_max_s=args.step_max_s, warmup_s=args.warmup_s, slo_p99_ms=args.slo_p99_ms,
            until=Until(p99_rel_width=args.p99_rel_width, min_requests=400, min_s=3.0),
        )  # fmt: skip
    except ValueError as exc:
        raise ConfigError(f"sweep: {exc}") from exc


def _print(table: SweepTable, report: Path) -> None:
    print(f"sweep report: {report}")
    print(f"sweep table: {report.parent / SUMMARY_FILE}")
    if (best := table.best) is None:
        print("embedperf sweep: no cell meets the SLO")
        return
    tokens = f", {best.tokens} tokens per input" if best.tokens else ""
    print(
        f"best under the SLO: {best.inputs} input(s) per request at {best.users} users{tokens}: "
        f"{best.embeddings_per_s:.1f} embeddings/s, P99 {best.p99_ms or 0.0:.1f} ms"
    )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.report_only is not None:
        report = build_sweep_report(args.report_only, args.lang)
    else:
        spec = _spec(args)
        overrides = parse_overrides(args.overrides)
        check_spec(spec, overrides)
        folder = args.runs_dir / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-sweep-{spec.scenario}"
        folder.mkdir(parents=True, exist_ok=False)
        if args.serve:
            with ServiceProcess(list(RAMP_SERVICE_ARGS), log_path=folder / "service.log") as service:
                run_sweep(spec, service.url, folder, overrides)
        else:
            host = args.host or load_scenario(spec.scenario, overrides=overrides).target.base_url
            run_sweep(spec, host, folder, overrides)
        report = build_sweep_report(folder, args.lang)
    table = SweepTable.model_validate_json((report.parent / SUMMARY_FILE).read_text(encoding="utf-8"))
    _print(table, report)
    return 0 if table.best is not None else 1

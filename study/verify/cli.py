"""`embedperf verify`: the four-layer release verdict against one target, as one report, JSON and JUnit
(the layers and exit codes: study/verify/verdict.py)."""

from __future__ import annotations

import argparse
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from collectors.options import DeviceOptions, add_device_options
from embedperf.errors import ConfigError
from embedperf.options import add_shared_option
from loadgen.lifecycle.options import add_api_key_option, export_api_key
from loadgen.lifecycle.preflight import check_target, normalise_base_url
from scenarios.loader import add_override_option, load_scenario, parse_overrides
from study.options import FieldFlag, add_field_flags, add_verdict_outputs, study_parser
from study.verify.function import run_function_layer, write_default_reference
from study.verify.load import LoadOptions
from study.verify.ops import ops_checks
from study.verify.perf import run_perf_layer
from study.verify.prometheus import DASHBOARDS_GLOB, DEPLOY_DIR, monitoring_needs, shipped_rule_files
from study.verify.report import REPORT_FILE, RESULT_FILE, write_junit, write_result, write_verify_report
from study.verify.soak import run_soak_layer
from study.verify.startup import StartedService
from study.verify.target import TargetClient
from study.verify.thresholds import VerifyThresholds, parse_layers, resolve_thresholds
from study.verify.verdict import Layer, LayerResult, build_result, judged, run_layers

DEFAULT_MODEL = "all-MiniLM-L6-v2"
API_KEY_ENV = "EMBEDPERF_TARGET_API_KEY"
EPILOG = """\
examples:
  embedperf verify --host http://127.0.0.1:8086 --target-qps 50
  embedperf verify --host http://svc:8086 --target-qps 400 --soak-s 14400 --prometheus-url http://prom:9090 \\
      --agent http://svc:9187 --junit verify.xml
  embedperf verify --host http://127.0.0.1:8099 --start-cmd 'embedperf serve --port {port}' --soak-s 600
  embedperf verify --host http://127.0.0.1:8086 --config release.yaml --set max_p99_drift_ratio=1.3
  embedperf verify --host http://127.0.0.1:8086 --layers 1,4      # re-check two layers (verdict incomplete)

Thresholds default to the seeds' go-live values; every one is a field of the `verify:` section of
--config FILE, and --set NAME=VALUE or the flags below override it (flags win). A warning passes; a
failure stops the layers after it. Exit codes: 0 every layer passed, 1 a layer failed, 2 usage or
pre-flight error, 3 incomplete.
"""
# the flags that set the VerifyThresholds field of their name
SHARED_THRESHOLDS = {
    "slo_p99_ms": "300",
    "error_budget_pct": "0.1",
    "target_qps": "none: capacity is shown, not judged",
    "headroom_pct": "25",
}
SOAK_FLAGS = (
    FieldFlag("--soak-s", float, "soak length in seconds (3600)"),
    FieldFlag("--soak-windows", int, "windows the soak is judged in (6)"),
    FieldFlag("--soak-users", int, "users of the soak (the scenario's)"),
    FieldFlag("--dimension", int, "expected embedding size (the target's /info)"),
)
LOOKBACK_FLAG = FieldFlag("--prometheus-lookback-s", float, "alerts must have fired within this")
FLAG_FIELDS = (*SHARED_THRESHOLDS, *(f.dest for f in (*SOAK_FLAGS, LOOKBACK_FLAG)))


def build_parser() -> argparse.ArgumentParser:
    parser = study_parser(
        "embedperf verify",
        "Run the four layers of a go-live check against a target, in order, stopping at the first that fails: "
        "function and precision, performance and utilisation, stability, operational readiness.",
        EPILOG,
    )
    parser.add_argument("--host", required=True, help="target base URL, e.g. http://127.0.0.1:8086")
    parser.add_argument(
        "--model-name", help=f"model name sent to the target (default: its /info, else {DEFAULT_MODEL})"
    )
    add_api_key_option(parser)
    parser.add_argument(
        "--start-cmd",
        metavar="CMD",
        help="start the service with this command ({port} becomes --host's port) and watch /health and /ready "
        "from its first second; it is stopped at the end",
    )
    parser.add_argument(
        "--layers", default="1,2,3,4", help="layers to run (default all); others count as skipped"
    )
    judged_by = parser.add_argument_group("thresholds (the `verify:` section; flags win)")
    judged_by.add_argument("--config", type=Path, metavar="FILE", help="YAML with a `verify:` section")
    add_override_option(judged_by, "any field (repeatable)")
    for name, default_text in SHARED_THRESHOLDS.items():
        add_shared_option(judged_by, name, default_text=default_text)
    add_field_flags(judged_by, SOAK_FLAGS)
    judged_by.add_argument(
        "--strict", action="store_true", help="a mean cosine below strict_cosine (0.999) fails, not warns"
    )
    judged_by.add_argument(
        "--reference", type=Path, help="fp32 reference set (embedperf precision --write-reference)"
    )
    judged_by.add_argument(
        "--reference-model", type=Path, help="without --reference: the model to write it from"
    )
    ops = parser.add_argument_group("operational readiness")
    ops.add_argument("--rules", type=Path, action="append", default=[], metavar="FILE",
                     help="alert rules to require (default: deploy/prometheus/*.yml)")  # fmt: skip
    ops.add_argument("--dashboard", type=Path, action="append", default=[], metavar="FILE",
                     help="Grafana dashboards whose metrics the target must expose (default: deploy/grafana/*.json)")  # fmt: skip
    add_field_flags(ops, [LOOKBACK_FLAG])
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, help="folder for the report, JSON and runs (runs/verify-<time>)")
    add_shared_option(out, "lang", "en")
    out.add_argument("--no-collectors", action="store_true", help="do not sample telemetry during the runs")
    add_verdict_outputs(parser)
    add_device_options(parser)
    return parser


def thresholds_from(args: argparse.Namespace) -> VerifyThresholds:
    # --set values parsed as YAML, the way scenario overrides are (empty: unset); None flags: not given
    flags: dict[str, Any] = {
        name: yaml.safe_load(value) if value.strip() else None
        for name, value in parse_overrides(args.overrides).items()
    }
    flags.update({name: getattr(args, name) for name in FLAG_FIELDS})
    if args.strict:
        flags["strict_action"] = "fail"
    return resolve_thresholds(args.config, flags)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    thresholds = thresholds_from(args)
    selected = parse_layers(args.layers)
    started = time.time()
    out: Path = args.out or Path("runs") / f"verify-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    out.mkdir(parents=True, exist_ok=True)
    rule_files = args.rules or shipped_rule_files()
    dashboards = args.dashboard or sorted(DEPLOY_DIR.glob(DASHBOARDS_GLOB))
    needs = monitoring_needs(rule_files, dashboards)
    base = normalise_base_url(args.host)
    export_api_key(args.api_key, API_KEY_ENV)
    notes: list[str] = []
    with ExitStack() as stack:
        client = stack.enter_context(TargetClient(base, args.model_name or DEFAULT_MODEL, API_KEY_ENV))
        service: StartedService | None = None
        if args.start_cmd:
            service = StartedService(args.start_cmd, client, thresholds, out / "service.log").start()
            stack.callback(service.stop)
            notes.append(f"service started by verify: {args.start_cmd} (output in {out / 'service.log'})")
        info = client.info(thresholds.info_path)
        model_override = {"target.model": args.model_name} if args.model_name else {}
        # one real request first (exit 2 when refused); it also resolves the model the target serves
        resolved = check_target(load_scenario(thresholds.search_scenario, overrides=model_override), base)
        client.model = resolved.target.model or info.model or DEFAULT_MODEL
        load = LoadOptions(
            runs_dir=out / "runs",
            collectors=not args.no_collectors,
            extra_args=DeviceOptions.from_namespace(args).command_args(),
            overrides=model_override,
        )

        def layer1() -> LayerResult:
            if (reference := args.reference) is None:
                reference = write_default_reference(out / "reference.parquet", args.reference_model)
                notes.append(
                    f"no --reference: wrote {reference} from the fp32 reference model on this host's CPU "
                    "(pass it as --reference next time)"
                )
            elif not reference.is_file():
                raise ConfigError(
                    f"--reference {reference} does not exist; write one with embedperf precision --write-reference"
                )
            return run_function_layer(client, thresholds, reference, info.dimension)

        def layer4() -> LayerResult:
            checks = ops_checks(client, thresholds, service, needs, args.prometheus_url, rule_files)
            evidence = {"monitoring needs": needs.source}
            if service is not None:
                polls = len(service.timeline)
                evidence["start-up polls"] = f"{polls} (every {thresholds.startup_poll_s:g} s)"
            return judged(4, checks, evidence)

        results = run_layers(
            [
                Layer(1, layer1),
                Layer(2, lambda: run_perf_layer(base, thresholds, load)),
                Layer(3, lambda: run_soak_layer(client, info, thresholds, load, out)),
                Layer(4, layer4),
            ],
            selected,
        )
    result = build_result(base, started, time.time(), thresholds, results, notes)
    for layer in result.layers:
        print(layer.line)
    print(f"verdict: {result.headline}")
    write_result(result, out / RESULT_FILE)
    print(f"report: {write_verify_report(result, out / REPORT_FILE, args.lang)}")
    if args.json:
        print(f"json: {write_result(result, args.json)}")
    if args.junit:
        print(f"junit: {write_junit(result, args.junit)}")
    print(f"verify folder: {out}")
    return result.exit_code

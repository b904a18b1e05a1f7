"""`embedperf` console script: one entry point, one subcommand per tool, each owned by its stage."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from embedperf import __version__
from embedperf.errors import EmbedperfError

# name -> (module, one-line help). Each module exposes `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("service.cli", "start the reference embedding service (FastAPI, dynamic batching)"),
    "collect": ("collectors.cli", "sample npu-smi / NVML / host / service telemetry into a run folder"),
    "agent": ("collectors.agent", "serve this host's npu-smi / NVML / host telemetry to runs on other hosts"),
    "run": ("loadgen.cli.run", "run a load scenario with Locust and write a run folder"),
    "bench": ("study.bench.cli", "start the service, run the ramp, stop it, write the report (make bench)"),
    "report": ("reports.cli", "build RUN_DIR/report.html from a run folder"),
    "compare": ("reports.compare_cli", "compare runs (baseline vs candidates) with a CI gate"),
    "capacity": ("analysis.cli.capacity", "capacity plan: max QPS under an SLO, devices for a target"),
    "history": ("study.history.cli", "headline figures of every run across commits; exit 1 when the newest is worse"),
    "synth": ("analysis.cli.synth", "write a synthetic run folder (scale tests, demos)"),
    "matrix": ("study.matrix.cli", "run the optimisation before/after matrix"),
    "precision": ("study.precision.cli", "check embeddings of a configuration against fp32"),
    "sweep": ("study.sweep.cli", "request-shape grid: inputs per request x users, heatmaps, the best cell under the SLO"),
    "search": ("study.bench.search", "find the highest open-loop rate that meets the P99 SLO (capacity search)"),
    "canary": ("study.canary.cli", "shift one load to a candidate stage by stage; promote or roll back"),
    "verify": ("study.verify.cli", "the four-layer release verdict: function, performance, stability, operations"),
}


def _usage() -> str:
    width = max(len(n) for n in SUBCOMMANDS)
    usage = "usage: embedperf <command> [options]   (embedperf <command> --help for details)"
    lines = [usage, "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def _load(name: str) -> Callable[[list[str]], int]:
    main: Callable[[list[str]], int] = importlib.import_module(SUBCOMMANDS[name][0]).main
    return main


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if args[0] in ("-V", "--version"):
        print(f"embedperf {__version__}")
        return 0
    name = args[0]
    if name not in SUBCOMMANDS:
        valid = ", ".join(SUBCOMMANDS)
        print(f"embedperf: unknown command {name!r}; valid commands: {valid}", file=sys.stderr)
        return 2
    try:
        return _load(name)(args[1:])
    except EmbedperfError as exc:
        print(f"embedperf {name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m collectors` / `embedperf collect`: sample telemetry into a run folder until stopped."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType
from typing import Any

from pydantic import ValidationError

from collectors.agent_pull import AgentSource
from collectors.base import Source, not_running
from collectors.config import SOURCE_NAMES, CollectorConfig
from collectors.host import HostSource
from collectors.npu_smi import NpuSmiSource
from collectors.nvml import NvmlSource
from collectors.options import add_sampling_options
from collectors.prometheus_pull import PrometheusSource
from collectors.runner import CollectorRunner
from collectors.service_metrics import ServiceMetricsSource
from embedperf.errors import ConfigError, EmbedperfError, problems

LOCAL_DEVICE_SOURCES = frozenset({"npu_smi", "nvml"})
EMPTY_IS_DEFAULT = frozenset({"npu_smi", "npu_ids", "host_label"})


def build_parser() -> argparse.ArgumentParser:
    """Each option's dest is the CollectorConfig field it sets (but --service-metric's and --agent's, which
    config_from_args gathers); an option not given keeps the field's default."""
    p = argparse.ArgumentParser(
        prog="embedperf collect",
        description="Sample device, host and service telemetry every interval into RUN_DIR (telemetry.parquet, "
        "collectors.json) until --duration ends or SIGINT/SIGTERM arrives.",
    )
    p.add_argument("--out", dest="out_dir", required=True, metavar="RUN_DIR", help="run folder to write into")
    p.add_argument(
        "--interval",
        dest="interval_s",
        type=float,
        metavar="INTERVAL",
        help="sampling interval in seconds (default 1)",
    )
    p.add_argument("--duration", dest="duration_s", type=float, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--sources",
        default="auto",
        help=f"auto (every source present here) or a comma list of {','.join(SOURCE_NAMES)}",
    )
    p.add_argument(
        "--service-url", default=None, metavar="BASE_URL", help="service base URL (metrics and PIDs)"
    )
    p.add_argument(
        "--metrics-path", default="/metrics", help="Prometheus text path on the service (default /metrics)"
    )
    p.add_argument(
        "--service-metric",
        action="append",
        default=[],
        metavar="CANONICAL=NAME",
        help="read a canonical service metric from the target's own Prometheus name, e.g. "
        "queue_depth=te_queue_size (repeatable; default: the reference service's names)",
    )
    p.add_argument("--service-pid", type=int, help="service PID (else found by its listening port)")
    p.add_argument("--generator-pid", type=int, help="load generator PID")
    p.add_argument(
        "--npu-mode", choices=("watch", "poll"), default="watch", help="npu-smi watch stream or -t polls"
    )
    p.add_argument(
        "--npu-timeout", dest="npu_timeout_s", type=float, metavar="S", help="kill a silent npu-smi after S s"
    )
    for end in ("start", "end"):
        dest = f"prometheus_{end}_unix_s"
        p.add_argument(f"--prometheus-{end}", dest=dest, type=float, metavar="UNIX_S", help=f"window {end}")
    p.add_argument("--host-label", help="value of the host column (default: this hostname)")
    add_sampling_options(p)
    return p


def config_from_args(argv: list[str]) -> CollectorConfig:
    args = vars(build_parser().parse_args(argv))
    args["service_metrics"] = dict(pair.partition("=")[::2] for pair in args.pop("service_metric"))
    args["agents"] = args.pop("agent")
    return collector_config(args)


def collector_config(values: dict[str, Any]) -> CollectorConfig:
    """The configuration of these command-line values (None: the default; an empty --npu-smi, --npu-ids or
    --host-label too); its problems as one ConfigError."""
    values = {k: v for k, v in values.items() if v is not None and (v != "" or k not in EMPTY_IS_DEFAULT)}
    try:
        if values.get("npu_ids"):
            values["npu_ids"] = tuple(int(v) for v in values["npu_ids"].split(",") if v.strip())
        return CollectorConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"invalid collector options: {problems(exc)}") from exc
    except ValueError as exc:
        raise ConfigError(f"invalid --npu-ids {values['npu_ids']!r}: give NPU IDs such as 4,5") from exc


def build_sources(config: CollectorConfig) -> list[Source]:
    """Every requested source; in `auto` mode absent ones are `skipped` with the reason, explicit ones `failed`."""
    candidates: list[Source] = [
        NpuSmiSource(config),
        NvmlSource(),
        HostSource(config),
        ServiceMetricsSource(config),
        PrometheusSource(config),
    ]
    sources: list[Source] = []
    remote = config.remote_target if config.sources == "auto" and not config.local_devices else None
    for source in candidates:
        if not config.wants(source.name):
            continue
        reason = source.probe()
        if source.name in LOCAL_DEVICE_SOURCES and remote:
            reason = (
                f"the target {remote} is another host: its devices are not this host's; run `embedperf agent` "
                "there and pass --agent URL (or --local-devices to sample this host anyway)"
            )
        if reason is not None:
            source.status.set("skipped" if config.sources == "auto" else "failed", reason)
        sources.append(source)
    return sources + [AgentSource(config, url) for url in config.agents]


def main(argv: list[str] | None = None) -> int:
    config = config_from_args(list(sys.argv[1:] if argv is None else argv))
    runner = CollectorRunner(config, build_sources(config))

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        runner.write_status()
        rows = runner.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    skipped = not_running(runner.sources)
    print(f"collectors: {rows} telemetry rows -> {runner.folder.telemetry}", file=sys.stderr)
    if skipped:
        print(f"collectors: not collected: {skipped}", file=sys.stderr)
    return 0


def cli_main() -> int:
    """Entry point for `python -m collectors`: errors as one line, exit code 2."""
    try:
        return main()
    except EmbedperfError as exc:
        print(f"collectors: error: {exc}", file=sys.stderr)
        return exc.exit_code

"""Collector configuration: typed and validated once, from CLI flags and environment."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from collectors.local_host import is_local_host

SOURCE_NAMES: tuple[str, ...] = ("npu_smi", "nvml", "psutil", "service", "prometheus")
NPU_SMI_ENV = "EMBEDPERF_NPU_SMI"


class CollectorConfig(BaseModel):
    """Everything `python -m collectors` needs; built by `collectors.cli`, read by every source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    out_dir: Path = Field(description="Run folder: telemetry parts, telemetry.parquet, collectors.json.")
    interval_s: float = Field(1.0, gt=0, le=3600, description="Sampling interval in seconds.")
    duration_s: float | None = Field(None, gt=0, description="Stop after this long; None: at SIGINT/SIGTERM.")
    sources: tuple[str, ...] | Literal["auto"] = Field("auto", description="`auto` or explicit source names.")
    service_url: str | None = Field(None, description="Base URL of the service under test.")
    metrics_path: str = Field("/metrics", description="Path of the Prometheus text endpoint on service_url.")
    service_metrics: dict[str, str] = Field(
        default_factory=dict,
        description="Canonical service metric -> the target's own Prometheus name (queue_depth=te_queue_size); "
        "those not named keep the reference service's names.",
    )
    service_pid: int | None = Field(None, description="Service PID; else found by the URL's listening port.")
    generator_pid: int | None = Field(None, description="Load generator PID (proc:generator).")
    npu_smi: str = Field(
        default_factory=lambda: os.environ.get(NPU_SMI_ENV, "npu-smi"),
        description="npu-smi executable (name on PATH or path).",
    )
    npu_ids: tuple[int, ...] | None = Field(None, description="Only these NPU IDs; None means all.")
    npu_mode: Literal["watch", "poll"] = Field("watch", description="One long-running watch, or -t polls.")
    npu_timeout_s: float = Field(10.0, gt=0, description="An npu-smi silent this long is killed, restarted.")
    npu_memory_poll_s: float = Field(10.0, gt=0, description="How often to poll what watch lacks (HBM MB).")
    prometheus_url: str | None = Field(None, description="Prometheus server to pull the window from.")
    prometheus_start_unix_s: float | None = None
    prometheus_end_unix_s: float | None = None
    host_label: str = Field(default_factory=socket.gethostname, description="Value of the `host` column.")
    local_devices: bool = Field(
        False,
        description="Sample this host's npu-smi/NVML even when service_url is on another host (in auto mode "
        "they are used only for a local target).",
    )
    agents: tuple[str, ...] = Field((), description="`embedperf agent` URLs to pull the run's samples from.")
    agent_token_file: Path | None = Field(
        None, description="File holding the agents' token (default: the variable EMBEDPERF_AGENT_TOKEN)."
    )

    @field_validator("sources", mode="before")
    @classmethod
    def _parse_sources(cls, value: object) -> object:
        if isinstance(value, str):
            if value == "auto":
                return "auto"
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list | tuple):
            unknown = [v for v in value if v not in SOURCE_NAMES]
            if unknown or not value:
                raise ValueError(
                    f"unknown source(s) {unknown or value!r}; valid: auto or a comma list of {', '.join(SOURCE_NAMES)}"
                )
            return tuple(value)
        return value

    @field_validator("service_metrics")
    @classmethod
    def _canonical(cls, value: dict[str, str]) -> dict[str, str]:
        known = ("queue_depth", "busy_frac", "request_rate_qps", "tokens_per_s", "batch_size_mean")
        if unknown := sorted(set(value) - set(known)):
            raise ValueError(f"unknown service metric(s) {unknown}; valid: {', '.join(known)}")
        if not all(value.values()):
            raise ValueError("give each service metric as CANONICAL=NAME, e.g. queue_depth=te_queue_size")
        return value

    @field_validator("metrics_path")
    @classmethod
    def _slash(cls, value: str) -> str:
        return value if value.startswith("/") else f"/{value}"

    @model_validator(mode="after")
    def _window(self) -> CollectorConfig:
        start, end = self.prometheus_start_unix_s, self.prometheus_end_unix_s
        if start is not None and end is not None and end <= start:
            raise ValueError("--prometheus-end must be after --prometheus-start")
        return self

    @property
    def metrics_url(self) -> str | None:
        return None if self.service_url is None else self.service_url.rstrip("/") + self.metrics_path

    def wants(self, source: str) -> bool:
        return self.sources == "auto" or source in self.sources

    @property
    def remote_target(self) -> str | None:
        """The target's host name when it is not this machine (its devices are not ours to sample)."""
        host = urlsplit(self.service_url).hostname if self.service_url else None
        return host if host and not is_local_host(host) else None

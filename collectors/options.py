"""Device and remote-telemetry options, one definition shared by `embedperf run`, `bench` and Locust.

They travel from each front end to the collectors subprocess (`python -m collectors`) unchanged,
so an option the README documents reaches the run whatever command started it.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from embedperf.errors import ConfigError


def parse_indices(text: str | None, option: str) -> list[int]:
    """`3,5` -> [3, 5]; a clear error for anything else."""
    if not text:
        return []
    try:
        return [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(f"invalid {option} {text!r}: give device indices such as 3,5") from exc


class DeviceOptions(BaseModel):
    """What the user said about devices and telemetry hosts; validated once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    devices: list[int] = Field(default_factory=list, description="Indices of the devices serving the target.")
    npu_ids: list[int] = Field(default_factory=list, description="Only sample these NPU IDs (all if empty).")
    npu_smi: str | None = Field(None, description="npu-smi executable.")
    prometheus_url: str | None = Field(None, description="Prometheus server to pull the run window from.")
    agents: list[str] = Field(default_factory=list, description="`embedperf agent` URLs to pull samples from.")
    agent_token_file: str | None = Field(
        None,
        description="File holding the agents' token (else the environment variable EMBEDPERF_AGENT_TOKEN).",
    )
    local_devices: bool = Field(
        False, description="Sample this host's npu-smi/NVML even when the target is on another host."
    )

    @field_validator("agents")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"--agent {url!r} needs a scheme, e.g. http://svc-host:9187")
        return [u.rstrip("/") for u in value]

    @classmethod
    def from_namespace(cls, ns: Any) -> DeviceOptions:
        try:
            return cls(
                devices=parse_indices(getattr(ns, "devices", None), "--devices"),
                npu_ids=parse_indices(getattr(ns, "npu_ids", None), "--npu-ids"),
                npu_smi=getattr(ns, "npu_smi", None) or None,
                prometheus_url=getattr(ns, "prometheus_url", None) or None,
                agents=[a for a in (getattr(ns, "agent", None) or []) if a],
                agent_token_file=getattr(ns, "agent_token_file", None) or None,
                local_devices=bool(getattr(ns, "local_devices", False)),
            )
        except ValidationError as exc:
            raise ConfigError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())) from exc

    def collector_args(self) -> list[str]:
        """Arguments for `python -m collectors` (agents are passed separately, one --agent each)."""
        values: dict[str, str | bool | None] = {
            "--npu-ids": ",".join(map(str, self.npu_ids)),
            "--npu-smi": self.npu_smi,
            "--prometheus-url": self.prometheus_url,
            "--local-devices": self.local_devices,
            "--agent-token-file": self.agent_token_file,
        }
        args: list[str] = []
        for flag, value in values.items():
            if value:
                args += [flag, value] if isinstance(value, str) else [flag]  # --local-devices is a flag
        return args

    def command_args(self) -> list[str]:
        """The same options as a front end's command line (`embedperf run` -> locust)."""
        args = self.collector_args()
        if self.devices:
            args += ["--devices", ",".join(map(str, self.devices))]
        for agent in self.agents:
            args += ["--agent", agent]
        return args


def add_device_options(group: argparse._ActionsContainer) -> None:
    """The options on a parser or argument group (Locust's, embedperf run's, embedperf bench's)."""
    group.add_argument(
        "--devices",
        metavar="3,5",
        help="NPU/GPU indices serving the target (as npu-smi / NVML number them); device figures and the "
        "capacity plan count these only (default: the target's /info, else the devices busy under load)",
    )
    add_sampling_options(group)


def add_sampling_options(group: argparse._ActionsContainer) -> None:
    """Where telemetry comes from (this host's npu-smi, a Prometheus, agents): `embedperf collect`'s too."""
    group.add_argument("--npu-ids", metavar="4,5", help="sample only these NPU IDs")
    group.add_argument("--npu-smi", metavar="PATH", help="npu-smi executable (env EMBEDPERF_NPU_SMI)")
    group.add_argument(
        "--prometheus-url", default=None, metavar="URL", help="Prometheus server to pull the run window from"
    )
    group.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="URL",
        help="`embedperf agent` on a service host (http://host:9187); repeat for several hosts",
    )
    group.add_argument(
        "--local-devices",
        action="store_true",
        help="sample this host's npu-smi/NVML even when the target is on another host",
    )
    group.add_argument(
        "--agent-token-file",
        metavar="PATH",
        help="file holding the --agent token (default: the environment variable EMBEDPERF_AGENT_TOKEN; "
        "never put the token itself on a command line)",
    )

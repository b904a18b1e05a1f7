"""The stated bottleneck of each load step, derived from what was measured, with its evidence.

Rules, first match wins (thresholds are module constants and the report states them):
  generator      the load generator's CPU mean >= GENERATOR_BUSY_PCT: it, not the target, set the pace
  host_launch    the inference worker busy >= DEVICE_BUSY_PCT while the device (its own telemetry) is busy
                 < DEVICE_IDLE_PCT: the host cannot launch work fast enough (Python per operator, host-device
                 synchronisation, small batches): "inference worker busy 98%, device busy 5%"
  device         device (or inference-worker) busy mean >= DEVICE_BUSY_PCT: the accelerator is the limit
  queue_idle     queue >= QUEUE_SHARE_PCT of latency while the device is busy < DEVICE_IDLE_PCT: requests
                 wait although the device idles (batching wait, scheduling, a lock)
  tokenise       tokenisation >= STAGE_SHARE_PCT of latency
  service_cpu    service CPU >= CPU_BUSY_PCT of the host's cores (or host CPU >= CPU_BUSY_PCT)
  client_network client and network >= CLIENT_SHARE_PCT of latency: the time is outside the server
  none           nothing saturated: the step did not load the system to a limit
  no_data        no successful request, or nothing measured to decide from
"""

from __future__ import annotations

from pydantic import BaseModel

from analysis.model.decomposition import Decomposition
from analysis.model.steps import StepStats
from analysis.model.telemetry import TelemetryStats

GENERATOR_BUSY_PCT = 90.0
DEVICE_BUSY_PCT = 90.0
DEVICE_IDLE_PCT = 50.0
QUEUE_SHARE_PCT = 30.0
STAGE_SHARE_PCT = 30.0
CPU_BUSY_PCT = 90.0
CLIENT_SHARE_PCT = 50.0


class Bottleneck(BaseModel):
    """One step's limit and the measured figures that name it (evidence keys carry their unit)."""

    index: int
    kind: str
    evidence: dict[str, float]


def step_bottleneck(
    stats: StepStats, tel: TelemetryStats, decomposition: Decomposition | None, cpu_cores: int | None = None,
) -> Bottleneck:  # fmt: skip
    evidence: dict[str, float] = {}
    # accelerator utilisation where a device reports it, else the inference worker's busy share
    busy = tel.device_util_mean_pct if tel.device_util_mean_pct is not None else tel.service_busy_mean_pct
    shares = decomposition.parts_pct if decomposition else {}
    for key, value in (
        ("generator_cpu_pct", tel.generator_cpu_mean_pct),
        ("device_busy_pct", busy),
        ("worker_busy_pct", tel.service_busy_mean_pct),
        ("service_cpu_pct", tel.service_cpu_mean_pct),
        ("host_cpu_pct", tel.host_cpu_mean_pct),
        ("queue_share_pct", shares.get("queue")),
        ("tokenise_share_pct", shares.get("tokenize")),
        ("compute_share_pct", shares.get("compute")),
        ("client_network_share_pct", shares.get("client_network")),
    ):
        if value is not None:
            evidence[key] = float(value)

    def found(kind: str, *keys: str) -> Bottleneck:
        return Bottleneck(
            index=stats.index, kind=kind, evidence={k: evidence[k] for k in keys if k in evidence}
        )

    if stats.n_ok == 0 or not evidence:
        return Bottleneck(index=stats.index, kind="no_data", evidence=evidence)
    if (tel.generator_cpu_mean_pct or 0.0) >= GENERATOR_BUSY_PCT:
        return found("generator", "generator_cpu_pct", "device_busy_pct")
    worker = tel.service_busy_mean_pct
    device = tel.device_util_mean_pct
    if worker is not None and device is not None and worker >= DEVICE_BUSY_PCT and device < DEVICE_IDLE_PCT:
        return found("host_launch", "worker_busy_pct", "device_busy_pct")
    if busy is not None and busy >= DEVICE_BUSY_PCT:
        return found("device", "device_busy_pct", "compute_share_pct")
    if busy is not None and busy < DEVICE_IDLE_PCT and shares.get("queue", 0.0) >= QUEUE_SHARE_PCT:
        return found("queue_idle", "queue_share_pct", "device_busy_pct")
    if shares.get("tokenize", 0.0) >= STAGE_SHARE_PCT:
        return found("tokenise", "tokenise_share_pct", "service_cpu_pct")
    service_cap, service_cpu = 100.0 * cpu_cores if cpu_cores else None, tel.service_cpu_mean_pct
    busy_cpu = service_cpu is not None and service_cap and service_cpu >= CPU_BUSY_PCT / 100.0 * service_cap
    if busy_cpu or (tel.host_cpu_mean_pct or 0.0) >= CPU_BUSY_PCT:
        return found("service_cpu", "service_cpu_pct", "host_cpu_pct")
    if shares.get("client_network", 0.0) >= CLIENT_SHARE_PCT:
        return found("client_network", "client_network_share_pct", "generator_cpu_pct")
    return found("none", "device_busy_pct", "service_cpu_pct", "generator_cpu_pct")

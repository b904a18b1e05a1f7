"""The serving-device list (`--device npu:0,npu:1`, `--workers N` on CPU), parsed and checked once.

Kept free of torch so that settings validation and `--help` stay fast; modelcore/devices.py turns a spec
into a torch.device. Indices are the ones npu-smi and NVML print, so a load generator can match /info's
`devices` against its telemetry. On CPU there is no device numbering: index is the worker number.
"""

from __future__ import annotations

from dataclasses import dataclass

DEVICE_KINDS = ("cpu", "cuda", "npu")


@dataclass(frozen=True)
class DeviceSpec:
    kind: str
    index: int
    name: str

    def as_info(self) -> dict[str, str | int]:
        """The /info `devices` item: {kind, index, name}."""
        return {"kind": self.kind, "index": self.index, "name": self.name}


def _parse_one(entry: str) -> DeviceSpec:
    kind, colon, index_text = entry.partition(":")
    if kind not in DEVICE_KINDS or (colon and not index_text.isdigit()):
        raise ValueError(f"device {entry!r} is not one of cpu, cuda[:N], npu[:N]")
    if kind == "cpu" and colon:
        raise ValueError(f"device {entry!r}: cpu takes no index; use --workers N for several CPU workers")
    index = int(index_text) if colon else 0
    return DeviceSpec(kind, index, f"{kind}:{index}")


def parse_device_list(text: str) -> list[DeviceSpec]:
    """'npu:0,npu:1' -> two specs; refuses empty entries, duplicates and mixed kinds with what to do."""
    entries = [entry.strip() for entry in text.split(",")]
    if not all(entries):
        raise ValueError(f"device list {text!r} has an empty entry; write e.g. npu:0,npu:1")
    specs = [_parse_one(entry) for entry in entries]
    kinds = sorted({spec.kind for spec in specs})
    if len(kinds) > 1:
        raise ValueError(
            f"device list {text!r} mixes kinds ({', '.join(kinds)}); one service serves from one kind "
            "of device, start one service per kind"
        )
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(
            f"device list {text!r} names {', '.join(repeated)} more than once "
            "('npu' means npu:0); list each device once"
        )
    return specs


def serving_devices(text: str, workers: int) -> list[DeviceSpec]:
    """One spec per inference worker: the listed accelerators, or `workers` CPU workers cpu:0..N-1."""
    specs = parse_device_list(text)
    if specs[0].kind == "cpu":
        return [DeviceSpec("cpu", i, f"cpu:{i}") for i in range(workers)]
    if workers != 1:
        raise ValueError(
            f"--workers {workers} applies to CPU only; on {specs[0].kind} the service runs one worker per "
            f"listed device, e.g. --device {specs[0].kind}:0,{specs[0].kind}:1"
        )
    return specs

"""Device resolution (cpu / cuda / npu), synchronisation for honest timing, and the software version matrix."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

import torch

from embedperf.errors import DeviceError

NPU_INSTALL_HINT = (
    "install it with `pip install 'embedperf[npu]'` (torch_npu matching torch "
    f"{torch.__version__.split('+')[0]}) and source CANN's environment first, e.g. "
    "`source /usr/local/Ascend/ascend-toolkit/set_env.sh`"
)
# the accelerators: what one is called, and what to do when torch sees none
ACCELERATORS = {
    "cuda": (
        "GPU",
        "torch sees no CUDA GPU; install a CUDA build of torch (https://pytorch.org/get-started) "
        "and check nvidia-smi, or use --device cpu",
    ),
    "npu": ("NPU", f"no Ascend NPU is available to torch_npu; {NPU_INSTALL_HINT}"),
}
ASCEND_ROOT = Path(os.environ.get("ASCEND_HOME_PATH", "/usr/local/Ascend"))


def _import_torch_npu() -> Any:
    try:
        return importlib.import_module("torch_npu")
    except ImportError as exc:
        raise DeviceError(
            f"device 'npu' needs torch_npu, which could not be imported ({exc}); {NPU_INSTALL_HINT}"
        ) from exc
    except Exception as exc:  # a broken CANN runtime surfaces as OSError/RuntimeError at import
        raise DeviceError(f"torch_npu failed to load its runtime ({exc}); {NPU_INSTALL_HINT}") from exc


def resolve_device(name: str) -> torch.device:
    """Turn 'cpu' / 'cuda[:N]' / 'npu[:N]' into a usable torch.device, or say what is missing."""
    kind, _, index_text = name.partition(":")
    index = int(index_text) if index_text else 0
    if kind == "cpu":
        return torch.device("cpu")
    if kind in ACCELERATORS:
        if kind == "npu":
            _import_torch_npu()
        runtime = getattr(torch, kind, None)  # torch.cuda, or torch.npu once torch_npu is imported
        if runtime is None or not runtime.is_available():
            raise DeviceError(f"device '{kind}' requested but {ACCELERATORS[kind][1]}")
        if index >= runtime.device_count():
            count, unit = runtime.device_count(), ACCELERATORS[kind][0]
            raise DeviceError(f"{kind}:{index} requested but only {count} {unit}(s) are visible")
        return torch.device(kind, index)
    raise DeviceError(f"unknown device {name!r}; use cpu, cuda[:N] or npu[:N]")


def synchronize(device: torch.device) -> None:
    """Wait for queued device work so a timer stopped afterwards measures the real compute time."""
    if device.type in ACCELERATORS:
        getattr(torch, device.type).synchronize(device)


def _read_value(path: Path, key: str) -> str | None:
    """The value of path's first `key = value` line, if any."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    return next((line.split("=", 1)[1].strip() for line in lines if line.startswith(key)), None)


def version_matrix(device: torch.device | None = None) -> dict[str, str]:
    """python, torch, transformers, and torch_npu / CANN / driver or CUDA where present."""
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for package in ("transformers", "torch_npu", "numpy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    toolkit = ASCEND_ROOT / "ascend-toolkit" / "latest"
    found = {
        "cann": _read_value(toolkit / "version.cfg", "toolkit_version")
        or _read_value(toolkit / "compiler" / "version.info", "Version"),
        "driver": _read_value(ASCEND_ROOT / "driver" / "version.info", "Version"),
        "cuda": str(torch.version.cuda) if torch.version.cuda else None,
    }
    versions |= {name: value for name, value in found.items() if value}
    if device is not None and device.type == "cuda":
        versions["gpu"] = torch.cuda.get_device_name(device)
    return versions

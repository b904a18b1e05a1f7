"""NVML source (NVIDIA): utilisation, memory-bandwidth utilisation, memory, temperature, power, SM clock.

`nvidia-ml-py` is optional (extra `gpu`); without it or without a driver the source is skipped.
A metric a GPU does not support is absent, not 0.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from collectors.base import Reading, Source
from embedperf.errors import CollectorError

MB = 1024.0 * 1024.0


def _load_pynvml() -> ModuleType | str:
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return "nvidia-ml-py is not installed (pip install 'embedperf[gpu]')"


class NvmlSource(Source):
    name = "nvml"

    def __init__(self) -> None:
        super().__init__()
        self.nvml: Any = None
        self.handles: list[Any] = []
        self._reported: set[tuple[str, str]] = set()

    def probe(self) -> str | None:
        loaded = _load_pynvml()
        if isinstance(loaded, str):
            return loaded
        try:
            loaded.nvmlInit()
            count = int(loaded.nvmlDeviceGetCount())
            loaded.nvmlShutdown()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"no NVIDIA driver: {exc}"
        return None if count > 0 else "NVML reports no GPUs"

    def start(self) -> None:
        loaded = _load_pynvml()
        if isinstance(loaded, str):
            raise CollectorError(loaded)
        self.nvml = loaded
        try:
            self.nvml.nvmlInit()
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self.nvml.nvmlDeviceGetCount())]
        except Exception as exc:
            raise CollectorError(f"NVML could not start: {exc}; check the NVIDIA driver (nvidia-smi)") from exc

    def _try(self, device: str, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            if type(exc).__name__ != "NVMLError_NotSupported" and (device, what) not in self._reported:
                self._reported.add((device, what))  # once per device and query, not every tick
                self.status.event("error", f"{what}: {exc}", device)
            return None

    def sample(self, ts_unix_s: float) -> Iterable[Reading]:
        return [r for i, handle in enumerate(self.handles) for r in self._sample_gpu(f"gpu{i}", handle)]

    def _sample_gpu(self, device: str, handle: Any) -> list[Reading]:
        nvml = self.nvml
        readings: list[Reading] = []
        util = self._try(device, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        if util is not None:  # .memory: % of time the memory controller was busy
            readings += [(device, "device_util_pct", float(util.gpu)), (device, "mem_bw_util_pct", float(util.memory))]
        mem = self._try(device, "memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        if mem is not None:
            readings += [(device, "mem_used_mb", mem.used / MB), (device, "mem_total_mb", mem.total / MB)]
        temp = self._try(
            device, "temperature", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        if temp is not None:
            readings.append((device, "temp_c", float(temp)))
        power_mw = self._try(device, "power", lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        if power_mw is not None:
            readings.append((device, "power_w", float(power_mw) / 1000.0))
        clock = self._try(device, "SM clock", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        if clock is not None:
            readings.append((device, "clock_mhz", float(clock)))
        return readings

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()

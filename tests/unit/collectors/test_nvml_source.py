"""NVML mapping against an injected fake pynvml: units, unsupported queries absent, missing module skipped."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from collectors.nvml import NvmlSource


class NVMLError_NotSupported(Exception):  # noqa: N801 - the name pynvml uses
    pass


def fake_pynvml(n_gpus: int = 2, power_supported: bool = True) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    mod.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    mod.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    calls: dict[str, Any] = {"shutdown": 0}
    mod.calls = calls  # type: ignore[attr-defined]
    mod.nvmlInit = lambda: None  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: n_gpus  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50 + h, memory=20 + h)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(  # type: ignore[attr-defined]
        used=1024 * 1024 * 1024, total=80 * 1024 * 1024 * 1024
    )
    mod.nvmlDeviceGetTemperature = lambda h, kind: 60 + h  # type: ignore[attr-defined]

    def power(h: int) -> int:
        if not power_supported:
            raise NVMLError_NotSupported("Not Supported")
        return 250_500

    mod.nvmlDeviceGetPowerUsage = power  # type: ignore[attr-defined]
    mod.nvmlDeviceGetClockInfo = lambda h, kind: 1410 if kind == 1 else 0  # type: ignore[attr-defined]
    return mod


def test_maps_every_gpu_with_units(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    source = NvmlSource()
    assert source.probe() is None
    source.start()
    readings = {(d, m): v for d, m, v in source.sample(0.0)}
    assert readings[("gpu0", "device_util_pct")] == 50.0
    assert readings[("gpu1", "mem_bw_util_pct")] == 21.0
    assert readings[("gpu0", "mem_used_mb")] == 1024.0
    assert readings[("gpu0", "mem_total_mb")] == 81920.0
    assert readings[("gpu1", "temp_c")] == 61.0
    assert readings[("gpu0", "power_w")] == pytest.approx(250.5)  # mW -> W
    assert readings[("gpu0", "clock_mhz")] == 1410.0
    source.close()
    assert sys.modules["pynvml"].calls["shutdown"] == 2  # type: ignore[attr-defined]


def test_unsupported_query_is_absent_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(n_gpus=1, power_supported=False))
    source = NvmlSource()
    source.start()
    metrics = {m for _, m, _ in source.sample(0.0)}
    assert "power_w" not in metrics and "temp_c" in metrics
    assert source.status.events == []  # NotSupported is normal, not an error


def test_missing_module_is_skipped_with_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    assert "nvidia-ml-py" in (NvmlSource().probe() or "")


def test_missing_driver_is_skipped_with_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_pynvml()

    def no_driver() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    mod.nvmlInit = no_driver  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    assert "no NVIDIA driver" in (NvmlSource().probe() or "")

"""Provenance for every run: host, accelerators, package versions, git commit and dirty flag."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import psutil

from embedperf.schema import HostInfo

TRACKED_PACKAGES = (
    "embedperf", "torch", "torch_npu", "transformers", "locust", "fastapi", "uvicorn", "pandas", "pyarrow",
    "numpy", "nvidia-ml-py",
)  # fmt: skip


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def host_info() -> HostInfo:
    """What machine this is; comparing runs from different hosts warns on these fields."""
    return HostInfo(
        hostname=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        machine=platform.machine(),
        cpu_model=_cpu_model(),
        cpu_cores_logical=psutil.cpu_count(logical=True),
        cpu_cores_physical=psutil.cpu_count(logical=False),
        mem_total_mb=round(psutil.virtual_memory().total / 2**20),
        accelerators=accelerators(),
    )


def accelerators() -> list[str]:
    """Names of visible accelerator tools, without importing heavy runtimes."""
    found = []
    if shutil.which(os.environ.get("EMBEDPERF_NPU_SMI", "npu-smi")):
        found.append("ascend-npu")
    if shutil.which("nvidia-smi"):
        found.append("nvidia-gpu")
    return found


def git_info(start: Path | None = None) -> dict[str, Any]:
    """Commit and dirty flag of the working tree; empty when not a git checkout."""
    cwd = str(start or Path(__file__).resolve().parent)

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    if (commit := git("rev-parse", "HEAD")) is None:
        return {}
    return {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}

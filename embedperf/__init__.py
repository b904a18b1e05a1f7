"""embedperf: load testing and benchmarking for embedding inference services."""

from __future__ import annotations

__version__ = "0.1.0"

"""The user's cache folder: derived files that are expensive to make and safe to lose.

$EMBEDPERF_CACHE_DIR; default $XDG_CACHE_HOME/embedperf or ~/.cache/embedperf. EMBEDPERF_CACHE_DIR=off turns
every cache off. It holds the fp32 reference vectors (study/reference_vectors.py) and the report templates
compiled to bytecode (reports/render.py); a reader that finds it unreadable or unwritable goes on without it.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "EMBEDPERF_CACHE_DIR"
CACHE_OFF = "off"


def cache_dir() -> Path | None:
    """The cache folder; None when EMBEDPERF_CACHE_DIR=off."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    if configured.lower() == CACHE_OFF:
        return None
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "embedperf"

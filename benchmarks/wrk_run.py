"""One wrk run, as every benchmark here starts it: closed loop, a Lua script, a bounded wait.

wrk is the low-cost generator (Debian's `wrk`): its own CPU stays small beside the service's, which a
Python client at many connections would not. Each benchmark reads what its script printed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REQUEST_TIMEOUT_S = 10


def run_wrk(
    url: str, script: Path, connections: int, duration_s: int, threads: int | None = None
) -> subprocess.CompletedProcess[str]:
    """wrk with `connections` against url for duration_s; at most 2 threads (this host's cores) by default."""
    cmd = [
        "wrk",
        f"-t{threads if threads is not None else min(2, connections)}",
        f"-c{connections}",
        f"-d{duration_s}s",
        "--timeout",
        f"{REQUEST_TIMEOUT_S}s",
        "-s",
        str(script),
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 60)


def wrk_found() -> bool:
    """Whether wrk is on PATH; says how to install it when not."""
    if shutil.which("wrk") is None:
        print(
            "wrk not found on PATH; install it with `make system-deps` (Debian package wrk)", file=sys.stderr
        )
        return False
    return True

"""Run a load-shape script in a fresh interpreter: importing Locust monkey-patches the process it runs in,
so the shapes' unit tests drive them in a subprocess of their own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]


def run_cases(script: str, cases: list[Any], timeout_s: float = 60.0) -> list[Any]:
    """`script` run with the JSON of `cases` as its argument; the JSON on its last line of output, one
    result per case."""
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(cases)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(results) == len(cases), out.stderr[-2000:]
    return list(results)

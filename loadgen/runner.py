"""Run a scenario as `locust --headless` in a subprocess and return its run folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from embedperf.errors import TargetError
from embedperf.schema import RunFolder
from scenarios.loader import load_scenario, scenario_path

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILES_DIR = REPO_ROOT / "locustfiles"
RUN_FOLDER_PREFIX = "run folder: "
STOP_GRACE_S = 30.0


def locustfile_for(kind: str) -> Path:
    """The entry point that runs a scenario of this kind (ramp, openloop, soak, spike)."""
    return LOCUSTFILES_DIR / f"{kind}.py"


def locust_command(
    scenario: str,
    host: str,
    runs_dir: Path,
    label: str = "",
    profile: str | None = None,
    overrides: Mapping[str, str] | None = None,
    collectors: bool = True,
) -> list[str]:
    """The `locust` command line for a scenario (validated here first, so errors come early)."""
    resolved = load_scenario(scenario, profile=profile, overrides=overrides)
    path = scenario_path(scenario)
    scenario_arg = (
        scenario if path.parent == REPO_ROOT / "scenarios" and path.stem == scenario else str(path.resolve())
    )
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile_for(resolved.kind)),
        "--headless",
        "--only-summary",
        "--scenario",
        scenario_arg,
        "--host",
        host,
        "--runs-dir",
        str(runs_dir.resolve()),
    ]
    if label:
        cmd += ["--label", label]
    if profile:
        cmd += ["--scenario-profile", profile]
    for key, value in (overrides or {}).items():
        cmd += ["--set", f"{key}={value}"]
    if not collectors:
        cmd.append("--no-collectors")
    return cmd


def run_scenario(
    scenario: str,
    host: str,
    runs_dir: Path,
    label: str = "",
    profile: str | None = None,
    overrides: dict[str, str] | None = None,
    collectors: bool = True,
    timeout_s: float | None = None,
    echo: IO[str] | None = None,
) -> RunFolder:
    """Run one scenario against host; Locust's output goes to `echo` (stderr by default).

    A run longer than timeout_s is stopped with SIGTERM; its folder is still returned (the
    manifest then notes the early stop).
    """
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    cmd = locust_command(scenario, host, runs_dir, label, profile, overrides, collectors)
    out = echo if echo is not None else sys.stderr
    proc = subprocess.Popen(
        cmd,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    folder_line: list[str] = []
    reader = threading.Thread(target=_pump, args=(proc, out, folder_line), daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    reader.join(timeout=10)
    if not folder_line:
        raise TargetError(
            f"locust exited with {proc.returncode} without writing a run folder; see its output above "
            f"(command: {' '.join(cmd)})"
        )
    return RunFolder(Path(folder_line[-1]))


def _pump(proc: subprocess.Popen[str], out: IO[str], folder_line: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        out.write(line)
        if line.startswith(RUN_FOLDER_PREFIX):
            folder_line.append(line[len(RUN_FOLDER_PREFIX) :].strip())

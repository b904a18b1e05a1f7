"""Run a scenario as `locust --headless` in a subprocess and return its run folder and exit code.

The target is checked first (exit 2, nothing measured); Locust's exit code is passed on
(loadgen.lifecycle.verdict). A Locust killed outright never prints its folder: it is found by the generator
pid its manifest records, and the run counts as incomplete (3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from embedperf.errors import TargetError
from embedperf.schema import RunFolder
from loadgen.lifecycle.announcements import RUN_FOLDER_PREFIX
from loadgen.lifecycle.options import export_api_key
from loadgen.lifecycle.preflight import check_target
from loadgen.lifecycle.verdict import EXIT_INCOMPLETE, EXIT_USAGE
from loadgen.processes.child import stop_child
from scenarios.loader import load_scenario, scenario_path
from scenarios.models import Scenario

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILES_DIR = REPO_ROOT / "locustfiles"
STOP_GRACE_S = 30.0


def locustfile_for(kind: str) -> Path:
    """The entry point that runs a scenario of this kind (ramp, openloop, soak, spike)."""
    return LOCUSTFILES_DIR / f"{kind}.py"


def locust_command(
    scenario: str, host: str, runs_dir: Path, label: str = "", profile: str | None = None,
    overrides: Mapping[str, str] | None = None, collectors: bool = True, extra_args: list[str] | None = None,
    locustfile: Path | None = None,
) -> list[str]:
    """The `locust` command line for a scenario, validated here first so errors come early."""
    resolved = load_scenario(scenario, profile=profile, overrides=overrides)
    overrides = {**(overrides or {}), **_absolute_paths(resolved)}
    path = scenario_path(scenario)
    scenario_arg = (
        scenario if path.parent == REPO_ROOT / "scenarios" and path.stem == scenario else str(path.resolve())
    )
    cmd = [
        sys.executable, "-m", "locust", "-f", str(locustfile or locustfile_for(resolved.kind)), "--headless",
        "--only-summary", "--scenario", scenario_arg, "--host", host, "--runs-dir", str(runs_dir.resolve()),
    ]
    if label:
        cmd += ["--label", label]
    if profile:
        cmd += ["--scenario-profile", profile]
    for key, value in (overrides or {}).items():
        cmd += ["--set", f"{key}={value}"]
    if not collectors:
        cmd.append("--no-collectors")
    return cmd + list(extra_args or [])


def _absolute_paths(resolved: Scenario) -> dict[str, str]:
    """The scenario's files made absolute: Locust starts in REPO_ROOT, not the user's directory."""
    out: dict[str, str] = {}
    payload = resolved.payload
    if payload.dataset is not None:
        out["payload.dataset.path"] = json.dumps(payload.dataset.path)
    if payload.quality_probes is not None:
        out["payload.quality_probes.reference"] = json.dumps(payload.quality_probes.reference)
    return out


@dataclass(frozen=True)
class RunOutcome:
    """What a run left: its folder (None when Locust wrote none) and the exit code to pass on."""

    folder: RunFolder | None
    exit_code: int


def run_scenario(scenario: str, host: str, runs_dir: Path, **options: Any) -> RunFolder:
    """run_scenario_outcome's folder; a TargetError when Locust wrote none (a timed-out run still has one)."""
    outcome = run_scenario_outcome(scenario, host, runs_dir, **options)
    if outcome.folder is None:
        raise TargetError(f"locust exited with {outcome.exit_code} without writing a run folder; see its output above")
    return outcome.folder


def run_scenario_outcome(
    scenario: str, host: str, runs_dir: Path, label: str = "", profile: str | None = None,
    overrides: dict[str, str] | None = None, collectors: bool = True, timeout_s: float | None = None,
    echo: IO[str] | None = None, api_key: str | None = None, extra_args: list[str] | None = None,
    locustfile: Path | None = None,
) -> RunOutcome:
    """Check the target, run Locust (its output to `echo`, stderr by default); the folder and exit code."""
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    resolved = load_scenario(scenario, profile=profile, overrides=overrides)
    export_api_key(api_key, resolved.target.api_key_env, env)
    export_api_key(api_key, resolved.target.api_key_env)  # the pre-flight request sends it too
    out = echo if echo is not None else sys.stderr
    checked = check_target(resolved, host)
    if checked.line:  # what the pre-flight check detected; the run is told it, so it detects nothing again
        print(checked.line, file=out, flush=True)
    overrides = {**(overrides or {}), **checked.overrides()}
    cmd = locust_command(
        scenario, checked.base_url, runs_dir, label, profile, overrides, collectors, extra_args, locustfile
    )
    before = {p.name for p in runs_dir.iterdir()}
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    folder_line: list[str] = []
    reader = threading.Thread(target=_pump, args=(proc, out, folder_line), daemon=True)
    reader.start()
    with _forward_stop_signals(proc):
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_child(proc, STOP_GRACE_S)
    reader.join(timeout=10)
    code = proc.returncode
    if folder_line:  # a negative code: killed by a signal after it wrote the folder
        return RunOutcome(RunFolder(Path(folder_line[-1])), code if code >= 0 else EXIT_INCOMPLETE)
    left = folder_left_by(runs_dir, before, proc.pid)
    if left is not None:  # killed before it could finalise: the folder is there, the run is not complete
        return RunOutcome(left, EXIT_INCOMPLETE)
    return RunOutcome(None, code if code == EXIT_USAGE else EXIT_INCOMPLETE)


@contextmanager
def _forward_stop_signals(proc: subprocess.Popen[str]) -> Iterator[None]:
    """SIGTERM/SIGINT to `embedperf run` stop Locust the graceful way (it finalises its folder and
    exits 3) instead of killing this process and orphaning Locust and its collectors."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def folder_left_by(runs_dir: Path, before: set[str], pid: int) -> RunFolder | None:
    """The run folder the generator `pid` created under runs_dir since `before` (the manifest records its pid;
    a new folder without a readable manifest counts when it is the only new one)."""
    new = sorted(p for p in runs_dir.iterdir() if p.is_dir() and p.name not in before)
    for path in new:
        try:
            raw = json.loads(RunFolder(path).manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(raw, dict) and raw.get("generator_pid") == pid:
            return RunFolder(path)
    return RunFolder(new[0]) if len(new) == 1 else None


def _pump(proc: subprocess.Popen[str], out: IO[str], folder_line: list[str]) -> None:
    """Pass Locust's output on but its `run folder:` line, which the caller prints once, last."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(RUN_FOLDER_PREFIX):
            folder_line.append(line[len(RUN_FOLDER_PREFIX) :].strip())
            continue
        out.write(line)

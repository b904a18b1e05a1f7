"""The shipped scenarios beyond the ramp actually run: `locust -f locustfiles/soak.py`, `locustfiles/spike.py`
and `embedperf run indexing`, each held a few seconds per step (--set) against the stub server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedperf.schema import RunFolder, read_manifest, read_requests_table
from loadgen.processes.stub_target import running_stub

REPO_ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 180  # a guard against a hang, not a performance bound
SHORT_CORPUS_MAX_CHARS = 300  # every text of en_long / zh_long is longer than this


@pytest.fixture(scope="module")
def stub_url() -> Iterator[str]:
    with running_stub("--delay-ms", "20") as url:
        yield url


def run(cmd: list[str], runs_dir: Path) -> tuple[RunFolder, list[dict[str, Any]]]:
    """Run a load command that must exit 0; its run folder and request rows."""
    proc = subprocess.run(
        [sys.executable, "-m", *cmd, "--runs-dir", str(runs_dir), "--no-collectors"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("run folder: ")]
    assert len(lines) == 1, proc.stdout[-3000:]
    folder = RunFolder(Path(lines[0].removeprefix("run folder: ").strip()))
    return folder, read_requests_table(folder).to_pylist()


def max_in_flight(rows: list[dict[str, Any]]) -> int:
    """The most requests that were on the wire at one instant."""
    events = sorted([(r["t_sent_unix_s"], 1) for r in rows] + [(r["t_done_unix_s"], -1) for r in rows])
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def test_soak_locustfile_runs_its_scenario(stub_url: str, tmp_path: Path) -> None:
    folder, rows = run(
        ["locust", "-f", "locustfiles/soak.py", "--headless", "--only-summary", "--host", stub_url,
         "--set", "steps.duration_s=3", "--set", "steps.warmup_s=0.5"],
        tmp_path,
    )  # fmt: skip
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.scenario.name == "soak"  # the locustfile's own default scenario
    assert [(s.label, s.users) for s in manifest.stages] == [("soak", 20)]
    assert rows and all(r["ok"] and r["target_users"] == 20 for r in rows), {r["error"] for r in rows}
    assert {r["n_inputs"] for r in rows} == {1, 4, 16}  # the soak's mixed batch sizes


def test_spike_locustfile_runs_baseline_burst_recovery(stub_url: str, tmp_path: Path) -> None:
    folder, rows = run(
        ["locust", "-f", "locustfiles/spike.py", "--headless", "--only-summary", "--host", stub_url,
         "--set", "steps.0.duration_s=2", "--set", "steps.0.warmup_s=0.5",
         "--set", "steps.1.duration_s=2", "--set", "steps.2.duration_s=2"],
        tmp_path,
    )  # fmt: skip
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.scenario.name == "spike"
    assert [(s.label, s.users) for s in manifest.stages] == [
        ("baseline", 10),
        ("burst", 100),
        ("recovery", 10),
    ]
    assert all(r["ok"] for r in rows), {r["error"] for r in rows}
    by_stage = {i: [r for r in rows if r["stage_index"] == i] for i in range(3)}
    assert all(by_stage.values()), {i: len(v) for i, v in by_stage.items()}
    assert {i: {r["target_users"] for r in v} for i, v in by_stage.items()} == {0: {10}, 1: {100}, 2: {10}}
    assert max_in_flight(by_stage[1]) > 10  # the burst was more than the baseline's 10 users could send


def test_indexing_scenario_runs_through_embedperf_run(stub_url: str, tmp_path: Path) -> None:
    folder, rows = run(
        ["embedperf.cli", "run", "indexing", "--host", stub_url,
         "--set", "steps.duration_s=2", "--set", "steps.warmup_s=0.5"],
        tmp_path,
    )  # fmt: skip
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.scenario.name == "indexing" and manifest.target.timeout_s == 300
    assert [(s.label, s.users) for s in manifest.stages] == [("u1", 1), ("u2", 2), ("u4", 4)]
    assert rows and all(r["ok"] for r in rows), {r["error"] for r in rows}
    assert {r["n_inputs"] for r in rows} <= {16, 32, 64} and len({r["n_inputs"] for r in rows}) > 1
    assert all(r["input_chars"] > r["n_inputs"] * SHORT_CORPUS_MAX_CHARS for r in rows)  # long documents

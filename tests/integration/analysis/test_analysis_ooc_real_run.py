"""On a real short Locust run (stub target, real collectors) the report's analysis equals the reference."""

from __future__ import annotations

from pathlib import Path

import yaml

from loadgen.cli.runner import run_scenario
from loadgen.processes.stub_target import running_stub
from tests.unit.analysis.test_analysis_ooc_summary import check_equal


def test_real_run_out_of_core_equals_in_memory(tmp_path: Path) -> None:
    scenario = {
        "name": "ooc-real",
        "kind": "ramp",
        "steps": [
            {"label": "u1", "users": 1, "duration_s": 2.0, "warmup_s": 0.5},
            {"label": "u4", "users": 4, "duration_s": 2.0, "warmup_s": 0.5},
        ],
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario), "utf-8")
    with running_stub("--delay-ms", "20") as url:  # hundreds of rows; no core spent on load
        folder = run_scenario(str(tmp_path / "s.yaml"), host=url, runs_dir=tmp_path / "runs", timeout_s=120)
    analysis = check_equal(folder)
    summary = analysis.summary
    assert [s.stats.label for s in summary.steps] == ["u1", "u4"]
    assert all(s.stats.n_ok > 0 for s in summary.steps) and summary.totals.n_ok > 0
    assert summary.steps[1].telemetry.n_samples > 0  # the collectors' telemetry, joined by time

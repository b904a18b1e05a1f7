"""`embedperf history`: trends over run folders built through the writers; an injected slowdown in the newest
run exits 1, an unchanged newest run exits 0, and runs of another load are listed apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from study.history.cli import main
from tests.golden.builders import T0_UNIX_S, stepped_run

USERS = [1, 4]
STEP_S = 20.0


def runs(root: Path, newest_latency_ms: float, newest_qps_per_user: float) -> Path:
    """Five runs across commits at 20 ms, a run of other loads, then the newest at the given speed."""
    for i in range(5):
        stepped_run(root / f"r{i}", USERS, STEP_S, latency_ms=20.0, seed=i, label=f"v{i}",
                    git={"commit": f"c0ffee{i}" * 4, "dirty": False}, start_unix_s=T0_UNIX_S + i * 3600)  # fmt: skip
    stepped_run(root / "other-load", [1, 2, 8], STEP_S, seed=9, start_unix_s=T0_UNIX_S + 5 * 3600)
    stepped_run(root / "r9", USERS, STEP_S, qps_per_user=newest_qps_per_user, latency_ms=newest_latency_ms, seed=7,
                label="new", git={"commit": "beef" * 10, "dirty": True}, start_unix_s=T0_UNIX_S + 9 * 3600)  # fmt: skip
    return root


def test_a_slowdown_in_the_newest_run_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = runs(tmp_path / "runs", newest_latency_ms=26.0, newest_qps_per_user=7.7)
    assert main([str(root)]) == 1
    out = capsys.readouterr().out
    assert "regression: p99_ms" in out and "regression: qps" in out
    data = json.loads((root / "history.json").read_text(encoding="utf-8"))
    assert [p["run_id"] for p in data["points"]] == ["r0", "r1", "r2", "r3", "r4", "r9"]  # by time
    assert [p["commit"] for p in data["points"]][-1] == "beefbeefbe" and data["points"][-1]["dirty"]
    assert all(p["p99_ci_ms"][0] <= p["p99_ms"] <= p["p99_ci_ms"][1] for p in data["points"])
    assert all(p["qps_ci"][0] <= p["qps"] <= p["qps_ci"][1] for p in data["points"])
    assert [a["run_id"] for a in data["apart"]] == ["other-load"]
    html = (root / "history.html").read_text(encoding="utf-8")
    assert 'id="history-verdict"' in html and "data:image/png;base64," in html and "http://" not in html


def test_an_unchanged_newest_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = runs(tmp_path / "runs", newest_latency_ms=20.0, newest_qps_per_user=10.0)
    assert main([str(root), "--lang", "zh"]) == 0
    assert "regression" not in capsys.readouterr().out
    assert "历次运行的核心指标" in (root / "history.html").read_text(encoding="utf-8")


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    from embedperf.cli import main as embedperf

    assert embedperf(["history", str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert embedperf(["history", str(tmp_path / "empty")]) == 2

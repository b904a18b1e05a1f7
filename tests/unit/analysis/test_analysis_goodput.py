"""Goodput everywhere: failed requests are never throughput, an over-budget step never meets the SLO."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from analysis.cli.capacity import main as capacity_main
from analysis.run.analyse import analyse_folder
from analysis.run.summary import write_analysis
from embedperf.error_kinds import error_kind
from embedperf.schema import RunFolder, StageRecord
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, write_run

REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"
NO_ANSWER = {"status_code": None, "ok": False, "srv_total_ms": None, "batch_size": None}


def refused_row(stage: int, t_sent: float, users: int) -> dict[str, object]:
    return ok_row(stage, t_sent, 0.4, users=users, error=REFUSED, **NO_ANSWER)


def dead_after_first_step(root: Path) -> RunFolder:
    """Step 0 (10 s): 20 ok/s. Step 1 (10 s): the target dies 2 s in; 1,000 refused/s after that."""
    stages = [
        StageRecord(index=0, label="u1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 10),
        StageRecord(index=1, label="u4", users=4, start_unix_s=T0_UNIX_S + 10, end_unix_s=T0_UNIX_S + 20),
    ]
    rows = [ok_row(0, T0_UNIX_S + i * 0.05, 20.0, users=1) for i in range(200)]
    rows += [ok_row(1, T0_UNIX_S + 10 + i * 0.05, 25.0, users=4) for i in range(40)]
    rows += [refused_row(1, T0_UNIX_S + 12 + i * 0.001, 4) for i in range(8000)]
    rows += [
        ok_row(1, T0_UNIX_S + 10 + 2.0 - 0.001, 25.0, users=4, status_code=401, ok=False, error="HTTP 401")
    ]
    scenario = scenario_for_stages(stages, slo={"p99_ms": 300.0, "error_budget_pct": 0.1})
    return write_run(root, rows, [], stages, scenario=scenario)


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (None, REFUSED, "connection_refused"),
        (None, "ConnectionResetError: [Errno 104] Connection reset by peer", "connection_reset"),
        (None, "TimeoutError: timed out", "timeout"),
        (503.0, "HTTP 503", "http_503"),
        (401.0, "HTTP 401", "http_401"),
        (200.0, "wrong dimension: 8, expected 16", "invalid_answer"),
        (None, "dropped: in-flight cap", "dropped"),
    ],
)
def test_error_kinds(status: float | None, error: str, kind: str) -> None:
    assert error_kind(status, error) == kind


def test_dead_step_has_no_goodput_and_never_meets_the_slo(tmp_path: Path) -> None:
    summary = analyse_folder(dead_after_first_step(tmp_path / "run"), n_boot=50).summary
    healthy, dead = (s.stats for s in summary.steps)
    assert healthy.qps == healthy.goodput_qps == pytest.approx(20.0) == healthy.offered_qps
    assert dead.goodput_qps == dead.qps == pytest.approx(4.0)  # 40 ok in 10 s
    assert dead.offered_qps == pytest.approx(804.1)  # failures are offered load, not throughput
    assert dead.errors_by_kind == {"connection_refused": 8000, "http_401": 1}
    assert [s.meets_slo for s in summary.steps] == [True, False]
    cap = summary.capacity
    assert cap.max_step_index == 0 and cap.max_qps_meeting_slo == pytest.approx(20.0)
    assert cap.knee_index != 1 and cap.peak_qps == pytest.approx(20.0)
    assert summary.slo_verdict == "partial"
    assert summary.totals.n_requests == 8241 and summary.totals.n_ok == 240
    assert summary.totals.most_common_error == "connection_refused"
    [window] = summary.outage_windows
    assert window.start_unix_s == T0_UNIX_S + 12 and window.end_unix_s == T0_UNIX_S + 20
    assert window.n_connection_errors == 8000


def test_steps_csv_and_summary_json_carry_goodput_and_keep_every_key(tmp_path: Path) -> None:
    folder = dead_after_first_step(tmp_path / "run")
    out = write_analysis(folder, analyse_folder(folder, n_boot=50).summary)
    with (out / "steps.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert float(rows[1]["qps"]) == float(rows[1]["goodput_qps"]) == pytest.approx(4.0)
    assert float(rows[1]["offered_qps"]) == pytest.approx(804.1)
    assert rows[1]["errors_by_kind"] == "connection_refused:8000;http_401:1"
    doc = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert doc["outage_windows"][0]["duration_s"] == 8.0
    assert doc["steps"][1]["stats"]["errors_by_kind"] == {"connection_refused": 8000, "http_401": 1}
    assert "connection_backoffs" in doc and doc["connection_backoffs"] is None  # null, never a missing key


def test_a_backoff_pause_does_not_split_an_outage(tmp_path: Path) -> None:
    stages = [StageRecord(index=0, label="u1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 20)]
    rows = [ok_row(0, T0_UNIX_S + 0.5, 10.0, users=1)]
    rows += [refused_row(0, T0_UNIX_S + t, 1) for t in (2.1, 4.1, 6.1)]  # one try every 2 s (capped back-off)
    rows += [ok_row(0, T0_UNIX_S + 9.5, 10.0, users=1)]
    rows += [refused_row(0, T0_UNIX_S + 12.2, 1)]
    summary = analyse_folder(write_run(tmp_path / "run", rows, [], stages), n_boot=20).summary
    assert [(w.start_unix_s - T0_UNIX_S, w.end_unix_s - T0_UNIX_S) for w in summary.outage_windows] == [
        (2.0, 7.0),
        (12.0, 13.0),
    ]


def test_capacity_on_a_run_without_success_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stages = [StageRecord(index=0, label="u4", users=4, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 10)]
    rows = [refused_row(0, T0_UNIX_S + i * 0.01, 4) for i in range(900)]
    rows += [ok_row(0, T0_UNIX_S + 5, 3.0, users=4, status_code=401, ok=False, error="HTTP 401")]
    folder = write_run(tmp_path / "run", rows, [], stages)
    assert capacity_main([str(folder.root)]) == 1
    out = capsys.readouterr().out
    assert "no successful requests: 901 of 901 failed, most common error: connection_refused (900)" in out
    assert "generator" not in out  # the generator's CPU is not blamed for a dead target

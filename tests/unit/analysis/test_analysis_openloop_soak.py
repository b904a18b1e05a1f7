"""Open-loop steps report latency from the intended send time and lateness; soak runs get trends."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.run.analyse import analyse_folder
from embedperf.schema import StageRecord
from reports.build import build_report
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, write_run


def test_open_loop_from_intended_and_lateness(tmp_path) -> None:
    stage = StageRecord(
        index=0, label="rate=20", rate=20.0, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 100.0
    )
    rows = []
    for i in range(2000):
        intended = T0_UNIX_S + i * 0.05
        late_s = 0.5 if i % 100 == 0 else 0.0  # 20 requests sent 500 ms late
        sent = intended + late_s
        rows.append(
            ok_row(
                0,
                sent,
                10.0,
                target_rate=20.0,
                t_intended_unix_s=intended,
                latency_from_intended_ms=10.0 + late_s * 1000,
            )
        )
    folder = write_run(tmp_path / "open", rows, [], [stage], kind="open_loop")
    summary = analyse_folder(folder, n_boot=50).summary
    step = summary.steps[0].stats
    assert summary.open_loop and step.rate == 20.0
    assert step.open_loop is not None
    assert step.open_loop.n_late == 20
    assert step.latency.p99_ms == pytest.approx(10.0)
    assert step.open_loop.from_intended.max_ms == pytest.approx(510.0)
    known = [10.0] * 1980 + [510.0] * 20
    assert step.open_loop.from_intended.p99_ms == pytest.approx(np.percentile(known, 99.0))
    assert step.open_loop.from_intended.p999_ms == pytest.approx(np.percentile(known, 99.9))
    assert "open_loop_late" not in {f.code for f in summary.findings}  # 1 % is the threshold, not above it
    html = build_report(folder).read_text()
    assert "intended send time" in html


def test_soak_run_gets_a_verdict_in_the_report(tmp_path) -> None:
    duration_s = 1200.0
    stage = StageRecord(
        index=0, label="soak", users=5, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + duration_s
    )
    rng = np.random.default_rng(1)
    sent = np.sort(rng.uniform(T0_UNIX_S, T0_UNIX_S + duration_s - 1, 6000))
    rows = [ok_row(0, float(t), float(20 + 60 * (t - T0_UNIX_S) / 3600 + rng.normal(0, 1))) for t in sent]
    telemetry = [
        (T0_UNIX_S + s, "psutil", "proc:service", "rss_mb", 900.0 + s / 10.0) for s in range(int(duration_s))
    ]
    scenario = scenario_for_stages([stage], name="soak", kind="soak")
    folder = write_run(tmp_path / "soak", rows, telemetry, [stage], scenario=scenario)
    summary = analyse_folder(folder, n_boot=50).summary
    assert summary.soak is not None
    assert summary.soak.memory_leak  # +360 MB/h
    assert summary.soak.rss_slope_mb_per_h == pytest.approx(360.0, rel=0.01)
    assert summary.soak.latency_drift
    assert summary.soak.verdict == "degrading"
    html = build_report(folder, lang="zh").read_text()
    assert "长稳趋势" in html and "劣化" in html

"""A ramp that never reached its limit reports "at least" everywhere; one that reached it, a plain figure.

Every folder is written through the run-folder writers (tests.golden.builders), as a load run leaves
it, then read by the paths a user takes: the report (headline, en and zh), summary.json and
`embedperf capacity`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from analysis.cli.capacity import main as capacity_main
from analysis.run.summary import RunSummary
from embedperf.schema import RunFolder, StageRecord
from reports.build import build_report
from reports.render import num
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, write_run

STEP_S = 6.0
SLO = {"p99_ms": 300.0, "error_budget_pct": 1.0}
TAG = re.compile(r"<[^>]+>")


def ramp_run(root: Path, users: list[int], qps: list[float], latency_ms: list[float]) -> RunFolder:
    """A closed-loop run, one STEP_S step per entry (1 s warm-up): qps[i] ok answers/s, latency_ms[i] ±10%."""
    rng = np.random.default_rng(3)
    stages, rows = [], []
    for i, (u, rate, lat) in enumerate(zip(users, qps, latency_ms, strict=True)):
        start = T0_UNIX_S + i * STEP_S
        stages.append(
            StageRecord(
                index=i, label=f"u{u}", users=u, start_unix_s=start, end_unix_s=start + STEP_S, warmup_s=1.0
            )
        )
        for t in start + (np.arange(int(rate * STEP_S)) + 0.5) / rate:  # evenly spaced: goodput = rate
            rows.append(ok_row(i, float(t), float(lat * rng.uniform(0.9, 1.1)), users=u))
    return write_run(root, rows, [], stages, scenario=scenario_for_stages(stages, slo=SLO))


def headline_text(folder: RunFolder, lang: str) -> str:
    html = build_report(folder, lang=lang).read_text(encoding="utf-8")
    start = html.index('id="headline"')
    section = html[start : html.index("</section>", start)]
    return re.sub(r"\s+", " ", TAG.sub(" ", section))


def summary_json(folder: RunFolder) -> dict[str, object]:
    doc = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def capacity_cli(folder: RunFolder, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = capacity_main([str(folder.root), *args])
    return code, out.getvalue()


def test_a_ramp_that_never_reached_its_limit_says_at_least_everywhere(tmp_path: Path) -> None:
    # Throughput still scales and P99 stays ~20 ms, far under 300 ms: no knee, the last step meets the SLO.
    folder = ramp_run(tmp_path / "run", [1, 4, 8], [10.0, 40.0, 80.0], [20.0, 20.0, 20.0])
    head_en = headline_text(folder, "en")
    doc = summary_json(folder)
    cap = doc["capacity"]
    assert isinstance(cap, dict)
    assert cap["lower_bound"] is True and cap["knee_index"] is None and cap["highest_step_index"] == 2
    qps = cap["max_qps_meeting_slo"]
    assert isinstance(qps, float) and qps == pytest.approx(80.0, rel=0.05)

    assert f"at least {num(qps, 1)} req/s at P99 ≤ 300 ms on 1 device(s)" in head_en, head_en
    assert "--set steps.2.users=16" in head_en and "embedperf search" in head_en
    head_zh = headline_text(folder, "zh")
    assert f"至少 {num(qps, 1)} req/s" in head_zh and "下限" in head_zh, head_zh

    code, out = capacity_cli(folder, "--target-qps", "1000")
    assert code == 0
    assert f"highest QPS meeting the SLO: at least {qps:.1f} (load 8; the ramp never reached the limit" in out
    assert "--set steps.2.users=16" in out and "embedperf search" in out
    plan = re.search(
        r"for 1000 QPS with 25% headroom: at most (\d+) replica\(s\) x 1 device\(s\) = at most (\d+)", out
    )
    assert plan is not None, out
    assert int(plan.group(2)) == int(np.ceil(1000.0 / (qps * 0.75)))
    assert "fewer devices may serve the target" in out


@pytest.mark.parametrize(
    ("case", "qps", "latency_ms", "best_index"),
    [
        # the last step breaks the SLO (P99 ~440 ms > 300 ms): the limit lies between steps 1 and 2
        ("last step fails", [10.0, 40.0, 80.0], [20.0, 20.0, 400.0], 1),
        # a knee at step 1 (40 -> 42 req/s, P99 20 -> 200 ms) although the last step still meets the SLO
        ("knee", [10.0, 40.0, 42.0], [20.0, 20.0, 200.0], 2),
    ],
)
def test_a_ramp_that_reached_its_limit_gives_the_plain_figure(
    tmp_path: Path, case: str, qps: list[float], latency_ms: list[float], best_index: int
) -> None:
    folder = ramp_run(tmp_path / "run", [1, 4, 8], qps, latency_ms)
    head_en = headline_text(folder, "en")
    cap = summary_json(folder)["capacity"]
    assert isinstance(cap, dict)
    assert cap["lower_bound"] is False, case
    assert cap["max_step_index"] == best_index
    assert (cap["knee_index"] == 1) is (case == "knee")
    best = cap["max_qps_meeting_slo"]
    assert isinstance(best, float)

    assert f"{num(best, 1)} req/s at P99 ≤ 300 ms on 1 device(s)" in head_en, head_en
    assert "at least" not in head_en and "lower bound" not in head_en.lower()
    assert "至少" not in headline_text(folder, "zh")

    code, out = capacity_cli(folder, "--target-qps", "1000")
    assert code == 0
    assert f"highest QPS meeting the SLO: {best:.1f} (load {[1, 4, 8][best_index]})" in out
    assert "at least" not in out and "at most" not in out
    assert re.search(r"for 1000 QPS with 25% headroom: \d+ replica\(s\)", out), out


def test_capacity_exits_1_when_no_step_meets_the_slo(tmp_path: Path) -> None:
    folder = ramp_run(tmp_path / "run", [1, 4], [10.0, 40.0], [500.0, 500.0])
    code, out = capacity_cli(folder, "--target-qps", "1000")
    assert code == 1
    last = out.strip().splitlines()[-1]
    assert last.startswith("embedperf capacity: no step meets the SLO (P99 <= 300 ms"), out
    assert "lowest tested load, step u1 (load 1): its P99" in last and "--slo-p99-ms" in last
    assert "highest QPS meeting the SLO" not in out and "replica(s)" not in out
    # the same run under a looser SLO has a capacity: exit 0
    assert capacity_cli(folder, "--slo-p99-ms", "1000")[0] == 0


def test_a_summary_written_before_the_flag_still_loads_as_not_a_lower_bound(tmp_path: Path) -> None:
    folder = ramp_run(tmp_path / "run", [1, 4], [10.0, 40.0], [20.0, 20.0])
    build_report(folder)
    doc = summary_json(folder)
    cap = doc["capacity"]
    assert isinstance(cap, dict) and cap["lower_bound"] is True
    assert RunSummary.model_validate(doc).capacity.lower_bound is True  # the flag survives the round trip
    del cap["lower_bound"], cap["highest_step_index"]
    old = RunSummary.model_validate(doc)
    assert old.capacity.lower_bound is False and old.capacity.highest_step_index is None

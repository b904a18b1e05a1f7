"""Availability seconds per step (summary, steps.csv, the step table) and the compare gate's `unavailable_s`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from analysis.compare.changes import compare_runs
from analysis.compare.gate import parse_gate
from analysis.run.analyse import analyse_folder
from analysis.run.summary import write_analysis
from embedperf.schema import RunFolder, StageRecord
from reports.build import build_report
from tests.golden.builders import REFUSED, T0_UNIX_S, ok_row, write_run

STEP_S = 30.0
USERS = [2, 4]


def outage_run(root: Path, outage: tuple[float, float] | None, seed: int) -> RunFolder:
    """Two closed-loop steps of 30 s (1 s warm-up), 20 req/s per user; during `outage` (seconds into the
    second step) the target refuses every request and the users back off: a few failures, no success."""
    rng = np.random.default_rng(seed)
    stages, rows = [], []
    for i, users in enumerate(USERS):
        start = T0_UNIX_S + i * STEP_S
        stages.append(
            StageRecord(index=i, label=f"users={users}", users=users, start_unix_s=start,
                        end_unix_s=start + STEP_S, warmup_s=1.0)
        )  # fmt: skip
        for t in np.sort(rng.uniform(start, start + STEP_S, int(20 * users * STEP_S))):
            down = outage is not None and i == 1 and start + outage[0] <= t < start + outage[1]
            if down and rng.uniform() < 0.02:  # backing off: few requests, all refused at once
                rows.append(ok_row(i, float(t), 1.0, users=users, ok=False, error=REFUSED, status_code=None))
            elif not down:
                rows.append(ok_row(i, float(t), float(rng.uniform(15.0, 25.0)), users=users))
    return write_run(root, rows, [], stages)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("availability")
    return {
        name: analyse_folder(outage_run(root / name, outage, seed), n_boot=300)
        for name, outage, seed in (("healthy", None, 1), ("healthy2", None, 2), ("outage", (5.0, 23.0), 3))
    }


def test_an_outage_with_few_failed_requests_shows_as_unavailable_seconds(runs, tmp_path: Path) -> None:
    steps = {s.stats.index: s.stats for s in runs["outage"].summary.steps}
    assert steps[0].unavailable_s == 0
    # nothing succeeds from 5 s into the step (the last answers land at 5.025 s) until 23 s: the whole
    # seconds 6..23 of the step, 17 one-second bins, whatever the few errors say
    assert steps[1].unavailable_s == 17
    assert steps[1].error_rate is not None and steps[1].error_rate < 0.05
    write_analysis(runs["outage"].folder, runs["outage"].summary)
    assert '"unavailable_s": 17' in (runs["outage"].folder.analysis / "summary.json").read_text(
        encoding="utf-8"
    )
    with (runs["outage"].folder.analysis / "steps.csv").open(encoding="utf-8") as fh:
        assert [row["unavailable_s"] for row in csv.DictReader(fh)] == ["0", "17"]
    html = build_report(runs["outage"].folder).read_text(encoding="utf-8")
    assert html.count('data-col="unavailable_s" class="warn">17<') == 1


def test_the_gate_fails_a_candidate_with_more_unavailable_seconds(runs) -> None:
    result = compare_runs(runs["healthy"], [runs["outage"]], parse_gate("unavailable_s:+0"))
    cand = result.candidates[0]
    failed = [g for g in cand.gate if g.failed and g.metric == "unavailable_s"]
    assert [g.scope for g in failed] == ["users=4"]
    assert "baseline 0.0 s, candidate 17.0 s" in failed[0].line
    same = compare_runs(runs["healthy"], [runs["healthy2"]], parse_gate("unavailable_s:+0"))
    assert same.status == "pass"

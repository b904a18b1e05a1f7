"""Which model answered each step (the fallback's share) and the slowest requests with their IDs.

Runs are built through the writers (write_run: new_manifest and the Parquet writer); the out-of-core
engine (analyse_folder, what the report uses) and the in-memory reference (load_and_analyse) must
give the same answers, and those answers are checked against values worked out by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunSummary
from embedperf.schema import RunFolder, StageRecord, read_requests_table
from tests.golden.builders import T0_UNIX_S, ok_row, write_run
from tests.golden.fixtures import golden_copy
from tests.oracles.in_memory.summary import load_and_analyse
from tests.unit.analysis.test_analysis_ooc_summary import assert_same

MAIN, FALLBACK = "minilm", "minilm-int8"
FAILED = {"ok": False, "status_code": 503, "error": "HTTP 503", "srv_total_ms": None}
STAGES = [
    StageRecord(
        index=0, label="u1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 20, warmup_s=2.0
    ),
    StageRecord(
        index=1, label="u8", users=8, start_unix_s=T0_UNIX_S + 20, end_unix_s=T0_UNIX_S + 40, warmup_s=2.0
    ),
]


def _row(
    stage: int, t: float, latency_ms: float, rid: str | None, model: str | None, **extra: Any
) -> dict[str, Any]:
    users = STAGES[stage].users or 1
    return ok_row(stage, t, latency_ms, users=users, request_id=rid, served_model=model, **extra)


def fallback_run(root: Path, with_header: bool = True, fallback: str | None = FALLBACK) -> RunFolder:
    """Step u1: 100 ok answers, all from the main model. Step u8: 100 ok answers, 30 from the fallback
    (the five slowest of the run among them: b-0, b-20, ... at 30 ms; then b-4, b-9, ... at 24 ms).

    Fallback answers that must not count: a failed request, a warm-up request and a validation probe.
    """
    rows = []
    for i in range(100):
        rows.append(_row(0, T0_UNIX_S + 3 + i * 0.1, 10.0 + i % 7, f"a-{i}", MAIN))
        slow_ms = 10.0 if i % 20 == 0 else 0.0  # five fallback answers are the run's slowest
        rows.append(
            _row(
                1,
                T0_UNIX_S + 23 + i * 0.1,
                20.0 + i % 5 + slow_ms,
                f"b-{i}",
                FALLBACK if i % 10 < 3 else MAIN,
            )
        )
    rows.append(_row(1, T0_UNIX_S + 30.05, 15.0, "b-failed", FALLBACK, **FAILED))
    rows.append(_row(1, T0_UNIX_S + 20.5, 15.0, "b-warmup", FALLBACK))
    rows.append(_row(1, T0_UNIX_S + 30.07, 15.0, "b-probe", FALLBACK, endpoint="validation_empty", **FAILED))
    if not with_header:
        rows = [{**r, "served_model": None} for r in rows]
    info = {"model": MAIN, "device": "cpu", **({"fallback_model": fallback} if fallback else {})}
    return write_run(root, rows, [], STAGES, service_info=info)


def both_engines(folder: RunFolder) -> RunSummary:
    summary = analyse_folder(folder).summary
    assert_same(summary.model_dump(mode="json"), load_and_analyse(folder).model_dump(mode="json"))
    return summary


def test_the_fallback_share_of_each_step_counts_its_ok_answers(tmp_path: Path) -> None:
    steps = [s.stats for s in both_engines(fallback_run(tmp_path / "run")).steps]
    assert [s.fallback_share for s in steps] == [0.0, pytest.approx(0.3)]
    assert steps[0].served_models == {MAIN: 100}
    assert steps[1].served_models == {MAIN: 70, FALLBACK: 30}  # most frequent first


def test_a_target_without_the_header_or_without_a_fallback_shows_no_share(tmp_path: Path) -> None:
    silent = both_engines(fallback_run(tmp_path / "silent", with_header=False))
    assert [(s.stats.fallback_share, s.stats.served_models) for s in silent.steps] == [(None, {}), (None, {})]
    undeclared = both_engines(fallback_run(tmp_path / "undeclared", fallback=None))
    assert [s.stats.fallback_share for s in undeclared.steps] == [None, None]
    assert undeclared.steps[1].stats.served_models == {MAIN: 70, FALLBACK: 30}  # still counted per model


def test_the_slowest_requests_are_the_slowest_steady_ok_ones_with_their_ids(tmp_path: Path) -> None:
    t = T0_UNIX_S + 25.0
    rows = [_row(1, t + i * 0.01, 5.0, f"fast-{i}", MAIN) for i in range(50)]
    rows += [
        _row(1, t + 1.0, 900.0, "tie-later", MAIN),
        _row(1, t + 0.5, 900.0, "tie-earlier", FALLBACK),  # same latency: the earlier send comes first
        _row(1, t + 0.7, 800.0, "same-time-b", MAIN),
        _row(1, t + 0.7, 800.0, None, MAIN),  # same latency and send time: an ID before none
        _row(1, t + 0.7, 800.0, "same-time-a", MAIN),
        _row(0, T0_UNIX_S + 5.0, 700.0, "step-u1", None, srv_total_ms=None, n_inputs=3, input_tokens=42),
        _row(1, t + 2.0, 5000.0, "failed", MAIN, **FAILED),  # not ok
        _row(1, T0_UNIX_S + 20.5, 5000.0, "warm-up", MAIN),  # in the warm-up
        _row(1, t + 3.0, 5000.0, "probe", MAIN, endpoint="validation_empty"),  # a validation probe
    ]
    rows += [_row(1, t + 4.0 + i * 0.01, 100.0 + i, f"mid-{i}", MAIN) for i in range(5)]
    summary = both_engines(write_run(tmp_path / "run", rows, [], STAGES))
    slowest = summary.slowest_requests
    assert [r.request_id for r in slowest] == [
        "tie-earlier", "tie-later", "same-time-a", "same-time-b", None, "step-u1",
        "mid-4", "mid-3", "mid-2", "mid-1",
    ]  # fmt: skip
    assert [r.latency_ms for r in slowest[:6]] == [900.0, 900.0, 800.0, 800.0, 800.0, 700.0]
    first, u1 = slowest[0], slowest[5]
    assert (first.stage_index, first.served_model, first.worker) == (1, FALLBACK, "w0")
    assert first.t_sent_unix_s == pytest.approx(t + 0.5) and first.srv_total_ms == pytest.approx(898.0)
    assert (u1.stage_index, u1.served_model, u1.srv_total_ms, u1.n_inputs, u1.input_tokens) == (
        0,
        None,
        None,
        3,
        42,
    )


def test_an_older_run_folder_without_the_columns_still_reports(tmp_path: Path) -> None:
    """The golden folders predate request_id, served_model (and probe_cosine): every figure still comes out."""
    folder = golden_copy("known_percentiles", tmp_path)
    assert read_requests_table(folder).column("request_id").null_count == 1064
    summary = both_engines(folder)
    assert [s.stats.fallback_share for s in summary.steps] == [None]
    assert [r.latency_ms for r in summary.slowest_requests] == [1000.0 - i for i in range(10)]
    assert {r.request_id for r in summary.slowest_requests} == {None}

"""Distributed pieces without processes: schedule shares, the master's worker book, the shape's stages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from embedperf.schema import (
    Manifest,
    StageRecord,
    new_manifest,
    new_run_folder,
    read_manifest,
    write_manifest,
)
from loadgen.lifecycle.worker_book import WorkerBook, sum_counters
from loadgen.traffic.context import RunContext
from loadgen.traffic.schedule import arrivals
from loadgen.traffic.shares import ScheduleShare, encode_shares, share_arrivals, share_from_options
from scenarios.loader import load_scenario
from scenarios.models import Step

STEPS = [
    Step(rate=40.0, duration_s=5.0),
    Step(rate=100.0, duration_s=5.0, ramp_s=2.0),
    Step(rate=10.0, duration_s=3.0),
]


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_constant_shares_partition_the_full_schedule(count: int) -> None:
    full = [(a.offset_s, a.stage_index) for a in arrivals(STEPS, "constant", seed=7)]
    parts = [list(share_arrivals(STEPS, "constant", 7, ScheduleShare(i, count))) for i in range(count)]
    union = sorted((a.offset_s, a.stage_index) for part in parts for a in part)
    assert union == sorted(full)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= len(STEPS)  # rate/N each, up to one arrival per step apart
    if count > 1:  # phase offsets: share i starts at the i-th slot of the first step
        assert [p[0].offset_s for p in parts] == pytest.approx([i / STEPS[0].rate for i in range(count)])


def test_poisson_shares_are_independent_streams_summing_to_the_rate() -> None:
    steps = [Step(rate=400.0, duration_s=50.0)]
    parts = [list(share_arrivals(steps, "poisson", 3, ScheduleShare(i, 4))) for i in range(4)]
    offsets = [[a.offset_s for a in p] for p in parts]
    assert len({tuple(o[:5]) for o in offsets}) == 4  # distinct seeds: no two shares alike
    counts = [len(o) for o in offsets]
    for n in counts:  # each Poisson(100/s) over 50 s: mean 5,000, sd ~71
        assert abs(n - 5000) < 5 * math.sqrt(5000)
    merged = sorted(t for o in offsets for t in o)
    assert abs(len(merged) - 20000) < 5 * math.sqrt(20000)
    gaps = [b - a for a, b in zip(merged, merged[1:], strict=False)]
    mean_gap = sum(gaps) / len(gaps)
    cv = math.sqrt(sum((g - mean_gap) ** 2 for g in gaps) / len(gaps)) / mean_gap
    assert mean_gap == pytest.approx(1 / 400.0, rel=0.05) and cv == pytest.approx(
        1.0, abs=0.05
    )  # exponential gaps


def test_share_assignment_round_trip_and_unknown_worker() -> None:
    encoded = encode_shares(["b", "a", "c"], 1234.5)
    assert share_from_options(encoded, "a") == ScheduleShare(1, 3, 1234.5)
    assert share_from_options(encoded, "z") is None
    assert share_from_options("", "a") is None
    with pytest.raises(ValueError):
        ScheduleShare(3, 3)


def test_a_process_dispatches_its_share_once() -> None:
    ctx = RunContext(scenario=load_scenario("openloop"), host="http://127.0.0.1:1", sink=lambda row: None)
    ctx.schedule_share = ScheduleShare(1, 2, 10.0)
    assert ctx.claim_share() == ScheduleShare(1, 2, 10.0)
    assert ctx.claim_share() is None


def _stages() -> list[StageRecord]:
    return [
        StageRecord(index=0, label="r1", rate=10.0, start_unix_s=100.0, end_unix_s=110.0),
        StageRecord(index=1, label="r2", rate=20.0, start_unix_s=110.0, end_unix_s=120.0),
    ]


def test_worker_book_records_missing_time_within_the_stages() -> None:
    book = WorkerBook()
    for t in range(100, 106):
        book.batch("cid-a", "w0-a", 10, float(t))
        book.batch("cid-b", "w1-b", 10, float(t))
    gone: list[str] = []
    for t in range(106, 121):  # b falls silent after t=105
        book.batch("cid-a", "w0-a", 10, float(t))
        gone += book.check(float(t))
    assert gone == ["w1-b"]  # reported once, after MISSING_AFTER_S of silence
    assert book.missing_now() == {"cid-b"}
    book.batch("cid-a", "w0-a", 3, 121.0, final=True, open_loop={"sent": 150, "max_lag_ms": 4.0})
    assert book.finals() == {"cid-a"}
    records = {w.worker: w for w in book.records(_stages(), 125.0)}
    assert records["w0-a"].missing_s == 0 and records["w0-a"].rows == 213 and records["w0-a"].final_rows
    assert records["w1-b"].missing_s == pytest.approx(15.0)  # silent from 105 to the stages' end at 120
    assert records["w1-b"].rows == 60 and not records["w1-b"].final_rows


def test_worker_book_closes_a_gap_when_the_worker_returns() -> None:
    book = WorkerBook()
    book.batch("c", "w0-c", 1, 100.0)
    assert book.check(105.0) == ["w0-c"] and book.check(106.0) == []
    book.batch("c", "w0-c", 1, 107.0)
    assert book.missing_now() == set()
    (record,) = book.records(_stages(), 130.0)
    assert record.missing == [(100.0, 107.0)] and record.missing_s == pytest.approx(7.0)


def test_worker_book_writes_typed_workers_and_a_note_into_the_manifest(tmp_path: Path) -> None:
    scenario = load_scenario("openloop")
    folder = new_run_folder(tmp_path, scenario.name)
    manifest: Manifest = new_manifest(folder.run_id, scenario, "http://127.0.0.1:1")
    manifest.stages = _stages()
    book = WorkerBook()
    book.batch("a", "w0-a", 5, 100.0)
    book.batch("b", "w1-b", 5, 100.0)
    book.check(112.0)
    book.batch("a", "w0-a", 5, 120.0, final=True, open_loop={"sent": 7, "dropped": 1, "max_lag_ms": 3.0})
    book.batch("b", "w1-b", 0, 120.0, final=True, open_loop={"sent": 5, "dropped": 0, "max_lag_ms": 9.0})
    book.finish(manifest, 121.0)
    write_manifest(folder, manifest)
    back = read_manifest(folder)
    assert [w.worker for w in back.workers] == ["w0-a", "w1-b"]
    assert back.workers[0].missing_s == pytest.approx(20.0) and back.workers[1].missing_s == pytest.approx(
        20.0
    )
    assert sum("was missing for 20.0 s" in n for n in back.notes) == 2
    assert back.open_loop == {"sent": 12, "dropped": 1, "max_lag_ms": 9.0}  # type: ignore[attr-defined]


def test_sum_counters_adds_counts_and_keeps_the_worst_lag() -> None:
    assert sum_counters([{"sent": 2, "max_lag_ms": 1.0}, {"sent": 3, "max_lag_ms": 5.0}]) == {
        "sent": 5,
        "max_lag_ms": 5.0,
    }


def test_a_worker_lost_before_its_first_batch_is_missing_since_the_run_began() -> None:
    book = WorkerBook()
    book.batch("a", "w0-a", 4, 101.0)
    assert book.lost("b", "w1-b", 100.0) and not book.lost("b", "w1-b", 100.0)
    assert book.missing_now() == {"b"} and book.check(130.0) == ["w0-a"]
    records = {w.worker: w for w in book.records(_stages(), 130.0)}
    assert records["w1-b"].rows == 0 and records["w1-b"].missing_s == pytest.approx(20.0)


def test_a_worker_locust_lost_is_missing_since_its_last_batch_before_the_book_would_say_so() -> None:
    book = WorkerBook()
    book.batch("a", "w0-a", 4, 101.0)
    book.batch("c", "w2-c", 4, 101.0, final=True)
    assert book.check(102.0) == []  # silent for 1 s only: not yet missing by the book's own rule
    assert book.lost("a", "w0-a", 100.0) and not book.lost("a", "w0-a", 100.0)
    assert not book.lost("c", "w2-c", 100.0)  # it sent its final rows: nothing was lost
    assert book.missing_now() == {"a"} and book.check(130.0) == []
    records = {w.worker: w for w in book.records(_stages(), 130.0)}
    assert records["w0-a"].missing == [(101.0, 130.0)] and records["w2-c"].missing_s == 0

"""Pure parts of load generation: header parsing, schedules, stage tagging, CPU summary, answer checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedperf.schema import RequestRow, RunFolder, read_requests_table
from loadgen.recording.monitor import summarise
from loadgen.recording.recorder import Recorder, StageTimeline
from loadgen.traffic.context import RunContext
from loadgen.traffic.headers import parse_server_timing
from loadgen.traffic.payloads import PayloadSampler, validation_cases
from loadgen.traffic.protocols.openai import check_embeddings
from loadgen.traffic.schedule import arrivals
from scenarios.loader import load_scenario
from scenarios.models import Payload, Step


def test_parse_server_timing_all_stages_and_garbage() -> None:
    header = "queue;dur=1.2, tokenize;dur=0.3, compute;dur=5.1, post;dur=0.2, total;dur=7.0, cache;desc=hit"
    assert parse_server_timing(header) == {
        "srv_queue_ms": 1.2,
        "srv_tokenize_ms": 0.3,
        "srv_compute_ms": 5.1,
        "srv_post_ms": 0.2,
        "srv_total_ms": 7.0,
    }
    assert parse_server_timing("compute;dur=abc, total") == {}
    assert parse_server_timing(None) == {}


def test_constant_schedule_is_evenly_spaced_and_stepped() -> None:
    steps = [Step(rate=10, duration_s=2), Step(rate=20, duration_s=1)]
    got = list(arrivals(steps, "constant"))
    assert len(got) == 40
    assert [a.stage_index for a in got].count(1) == 20
    assert got[1].offset_s == pytest.approx(0.1)
    assert got[20].offset_s == pytest.approx(2.0)


def test_poisson_schedule_rate_and_bounds() -> None:
    got = list(arrivals([Step(rate=500, duration_s=20)], "poisson", seed=3))
    assert 9_500 < len(got) < 10_500
    assert all(0 <= a.offset_s < 20 for a in got)
    gaps = [b.offset_s - a.offset_s for a, b in zip(got, got[1:], strict=False)]
    assert min(gaps) >= 0
    assert sum(gaps) / len(gaps) == pytest.approx(1 / 500, rel=0.05)


def test_recorder_tags_rows_by_real_stage_boundaries(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run").create()
    timeline = StageTimeline()
    timeline.begin(0, "u1", 100.0, users=1, warmup_s=1)
    timeline.begin(1, "u10", 110.0, users=10)
    timeline.end(120.0)
    recorder = Recorder(folder, timeline)
    for t in (99.5, 105.0, 110.0, 119.0):
        recorder.write(RequestRow(t_intended_unix_s=t, t_sent_unix_s=t, ok=True, worker="local"))
    assert recorder.close() == 4
    table = read_requests_table(folder).to_pydict()
    assert table["stage_index"] == [0, 0, 1, 1]
    assert table["stage_label"] == ["u1", "u1", "u10", "u10"]
    assert table["target_users"] == [1, 1, 10, 10]
    assert set(table["run_id"]) == {"run"}
    assert timeline.stages[0].end_unix_s == 110.0


def test_cpu_summary_marks_saturation_per_process() -> None:
    calm = [{"worker": "a", "ts_unix_s": i, "cpu_pct": 40.0} for i in range(20)]
    busy = [{"worker": "b", "ts_unix_s": i, "cpu_pct": 98.0} for i in range(20)]
    assert not summarise(calm).saturated
    summary = summarise(calm + busy)
    assert summary.saturated and "b" in summary.note
    assert summary.max_pct == 98.0


def _ctx(expected_dim: int | None) -> RunContext:
    scenario = load_scenario("smoke", environ={})
    return RunContext(
        scenario=scenario,
        host="http://x",
        sink=lambda row: None,
        expected_dim=expected_dim,
        dim_source="test",
    )


def check_body(body: bytes, ctx: RunContext, n_inputs: int) -> tuple[str, int | None]:
    return check_embeddings(body, n_inputs, "float", ctx)


def test_check_body_count_dimension_and_learning() -> None:
    body = json.dumps({"data": [{"embedding": [0.0] * 4}] * 2, "usage": {"prompt_tokens": 9}}).encode()
    assert check_body(body, _ctx(4), 2) == ("", 9)
    assert "wrong count" in check_body(body, _ctx(4), 3)[0]
    assert "wrong dimension: 4, expected 8" in check_body(body, _ctx(8), 2)[0]
    learner = _ctx(None)
    assert check_body(body, learner, 2)[0] == ""
    assert learner.expected_dim == 4 and learner.dim_source == "first answer"
    assert "invalid JSON" in check_body(b"<html>", _ctx(4), 1)[0]


def test_payload_sampler_weights_and_validation_cases() -> None:
    spec = Payload(corpora=["zh_short"], inputs_per_request=[{"n": 1, "weight": 1}, {"n": 4, "weight": 1}])
    sampler = PayloadSampler(spec, "/v1/embeddings")
    sizes = [len(sampler.next().inputs) for _ in range(400)]
    assert set(sizes) == {1, 4} and 120 < sizes.count(4) < 280
    cases = {c.endpoint: c for c in validation_cases()}
    assert len(cases["validation:long_5000"].inputs[0]) == 5000
    assert cases["validation:empty_must_fail"].expect_failure
    mixed = PayloadSampler(Payload(validation_mix=1.0), "/v1/embeddings")
    assert mixed.next().endpoint.startswith("validation:")


def test_repeat_fraction_controls_how_many_inputs_repeat() -> None:
    from loadgen.traffic.payloads import PayloadSampler
    from scenarios.models import Payload

    def distinct_share(fraction: float) -> float:
        sampler = PayloadSampler(Payload(repeat_fraction=fraction, seed=3), "/v1/embeddings")
        texts = [t for _ in range(2000) for t in sampler.next().inputs]
        return len(set(texts)) / len(texts)

    assert distinct_share(0.0) == 1.0  # every input unique: a cache cannot hit
    assert distinct_share(1.0) < 0.1  # verbatim corpus texts repeat
    assert 0.45 < distinct_share(0.5) < 0.6

"""`embedperf sweep`: the grid's table and best cell from run folders built through the writers, its page, and
that every registered protocol carries several inputs in one request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from embedperf.schema import StageRecord, StepEnding
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.registry import BUILTIN
from scenarios.loader import load_scenario
from scenarios.models import Target
from study.sweep.cli import main
from study.sweep.runner import shape_overrides
from study.sweep.spec import SweepRecord, SweepRun, SweepSpec
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, write_run

STEP_S = 10.0
SPEC = SweepSpec(inputs=[1, 8], users=[1, 4], slo_p99_ms=100.0)


def latency_ms(inputs: int, users: int) -> float:
    """A target whose latency grows with the batch a request carries and the users queueing."""
    return 5.0 + 2.0 * inputs * users


def shape_run(folder: Path, inputs: int) -> str:
    """One request shape's run: an adaptive step per user count, closed loop (users / latency requests/s)."""
    stages, rows = [], []
    for i, users in enumerate(SPEC.users):
        start = T0_UNIX_S + i * STEP_S
        ending = StepEnding(reason="converged" if users == 1 else "max_time", target_rel_width=0.25, n_ok=400)
        stages.append(StageRecord(index=i, label=f"u{users}", users=users, start_unix_s=start,
                                  end_unix_s=start + STEP_S, warmup_s=0.0, ending=ending))  # fmt: skip
        ms = latency_ms(inputs, users)
        qps = users * 1000.0 / ms
        rows += [
            ok_row(i, start + k / qps, ms, users=users, n_inputs=inputs) for k in range(int(qps * STEP_S))
        ]
    scenario = scenario_for_stages(stages, slo={"p99_ms": 100.0, "error_budget_pct": 1.0})
    run = folder / "runs" / f"n{inputs}"
    write_run(run, rows, [], stages, scenario=scenario)
    return str(run.relative_to(folder))


def test_the_grid_names_the_most_embeddings_per_second_under_the_slo(tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    folder.mkdir()
    record = SweepRecord(spec=SPEC, started_unix_s=T0_UNIX_S, finished_unix_s=T0_UNIX_S + 40)
    record.runs = [
        SweepRun(inputs=n, tokens=None, run_dir=shape_run(folder, n), exit_code=0) for n in SPEC.inputs
    ]
    record.runs.append(SweepRun(inputs=64, tokens=None, run_dir=None, exit_code=2))
    record.write(folder)
    assert main(["--report-only", str(folder)]) == 0
    table = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    assert len(table["cells"]) == 4 and table["missing"] == ["n64 (exit 2)"]
    # n=8 at 4 users: 69 ms (meets 100 ms), 4 x 1000 / 69 x 8 = 464 embeddings/s: more than any other cell
    best = table["best"]
    assert (best["inputs"], best["users"]) == (8, 4) and best["ended"] == "max_time"
    assert best["embeddings_per_s"] == pytest.approx(8 * 4 * 1000.0 / latency_ms(8, 4), rel=0.02)
    html = (folder / "sweep.html").read_text(encoding="utf-8")
    assert 'id="sweep-best"' in html and html.count("data:image/png;base64,") == 1 and "http://" not in html


def test_no_cell_under_the_slo_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "sweep"
    folder.mkdir()
    spec = SPEC.model_copy(update={"slo_p99_ms": 1.0})
    record = SweepRecord(spec=spec, started_unix_s=T0_UNIX_S)
    record.runs = [SweepRun(inputs=1, tokens=None, run_dir=shape_run(folder, 1), exit_code=0)]
    record.write(folder)
    assert main(["--report-only", str(folder), "--lang", "zh"]) == 1
    assert "no cell meets the SLO" in capsys.readouterr().out


def test_each_shape_is_a_valid_adaptive_ramp() -> None:
    scenario = load_scenario("ramp", overrides=shape_overrides(SweepSpec(tokens=[64]), 16, 64))
    assert [s.users for s in scenario.steps] == [1, 4, 16] and all(
        s.until is not None for s in scenario.steps
    )
    assert scenario.payload.inputs_per_request[0].n == 16 and scenario.payload.tokens is not None
    assert scenario.payload.tokens.mean == 64


@pytest.mark.parametrize("protocol", BUILTIN, ids=lambda p: p.name)
def test_every_protocol_sends_several_inputs_in_one_request(protocol: object) -> None:
    texts = [f"text number {i}" for i in range(4)]
    body = protocol.request_body(RequestPayload(inputs=texts, endpoint="embed"), "embed", Target(model="m"))  # type: ignore[attr-defined]
    assert all(text in body for text in texts)

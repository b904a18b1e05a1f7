"""The report's out-of-core analysis equals the in-memory reference on whole runs: summary and figure inputs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from analysis.cli.synth import synth_request_chunks, synthesize
from analysis.compare import samples as ooc_samples
from analysis.engine import requests as ooc
from analysis.engine import views
from analysis.model.steps import OUTCOME_OK
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.schema import RunFolder, StageRecord, write_requests_parquet
from tests.golden.builders import scenario_for_stages, write_run
from tests.oracles.in_memory.figures import latency_by_input_tokens
from tests.oracles.in_memory.load import load_run
from tests.oracles.in_memory.steps import prepare_requests
from tests.oracles.in_memory.summary import load_and_analyse
from tests.unit.analysis.test_analysis_ooc import _with_edge_cases

T0 = 1_780_000_000.0
REL = 1e-9


def assert_same(got: Any, expected: Any, path: str = "") -> None:
    """Equal structures; floats to REL (sums and DuckDB's interpolation differ in the last bits)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), path
        for key in expected:
            assert_same(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list | tuple):
        assert isinstance(got, list | tuple) and len(got) == len(expected), path
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_same(g, e, f"{path}[{i}]")
    elif isinstance(expected, float) and not isinstance(got, bool):
        assert isinstance(got, float | int), path
        assert got == pytest.approx(expected, rel=REL, abs=1e-9) or (
            math.isnan(got) and math.isnan(expected)
        ), path
    else:
        assert got == expected, path


def check_equal(folder: RunFolder) -> RunAnalysis:
    expected = load_and_analyse(folder)
    analysis = analyse_folder(folder)
    only_out_of_core = {"soak_minutes"}  # per-minute telemetry findings: checked on their own below
    assert_same(
        analysis.summary.model_dump(mode="json", exclude=only_out_of_core),
        expected.model_dump(mode="json", exclude=only_out_of_core),
    )
    # figure inputs against the in-memory functions over the same rows
    data = load_run(folder)
    prepared = prepare_requests(data.requests, data.manifest.stages)
    assert [b.model_dump() for b in analysis.figures.lengths] == [
        b.model_dump() for b in latency_by_input_tokens(prepared.rows)
    ]
    rows = prepared.rows
    for step in analysis.summary.steps:
        sub = rows.iloc[prepared.slices[step.stats.index]]
        ok = (sub["outcome"].to_numpy() == OUTCOME_OK) & ~sub["probe"].to_numpy()
        batch = sub["batch_size"].dropna().astype(int).value_counts().to_dict()
        assert analysis.figures.batch_sizes.get(step.stats.index, {}) == batch
        inputs = sub["n_inputs"].to_numpy(dtype=np.float64)[ok]
        embeddings = float(np.nansum(inputs)) if np.isfinite(inputs).any() else float(ok.sum())
        assert analysis.figures.embeddings[step.stats.index] == pytest.approx(embeddings)
    failed = rows[(rows["outcome"].to_numpy() != OUTCOME_OK) & ~rows["probe"].to_numpy()]
    assert (
        sum(n for _, n in analysis.figures.top_errors) == len(failed)
        or len(analysis.figures.top_errors) == 10
    )
    return analysis


def test_synthetic_run_with_telemetry_equals_the_reference(tmp_path: Path) -> None:
    folder = synthesize(tmp_path / "synth", n_requests=12_000, n_devices=3, hours=0.2, seed=3)
    analysis = check_equal(folder)
    summary = analysis.summary
    assert summary.serving_devices and summary.steps[0].telemetry.device_util_mean_pct is not None
    assert summary.totals.n_requests == 12_000 and analysis.figures.request_series is not None
    minutes = analysis.figures.minutes  # a 12-minute run gets per-minute series, telemetry joined
    assert len(minutes) >= 11 and all(p.device_util_pct is not None for p in minutes)
    assert summary.soak_minutes is not None and not summary.soak_minutes.thermal_throttling


def _soak_run(root: Path, n: int, seed: int) -> RunFolder:
    """One 20-minute stage (a soak) with probes, timeouts, lost stage tags, drops and a refused second."""
    stage = StageRecord(
        index=0, label="soak", users=20, start_unix_s=T0, end_unix_s=T0 + 1200.0, warmup_s=30.0
    )
    rng = np.random.default_rng(seed)
    quarters = [
        stage.model_copy(
            update={"index": i, "start_unix_s": T0 + 300.0 * i, "end_unix_s": T0 + 300.0 * (i + 1)}
        )
        for i in range(4)
    ]  # the generator writes four steps: one soak stage cut in four, tagged as stage 0
    rows = pa.concat_tables(synth_request_chunks(rng, "soak", quarters, n))
    rows = rows.set_column(
        rows.schema.get_field_index("stage_index"),
        "stage_index",
        pa.array(np.zeros(rows.num_rows, np.int64)).cast(rows.schema.field("stage_index").type),
    )
    table = _with_edge_cases(rows, rng)
    refused = np.zeros(table.num_rows, dtype=bool)
    sent = table.column("t_sent_unix_s").to_numpy(zero_copy_only=False)
    refused[(sent >= T0 + 600.0) & (sent < T0 + 605.0)] = True
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    for i in np.nonzero(refused)[0]:
        columns["ok"][i], columns["status_code"][i] = False, None
        columns["error"][i] = "ConnectionRefusedError: [Errno 111] Connection refused"
    telemetry = [(T0 + s, "psutil", "proc:service", "rss_mb", 500.0 + 0.2 * s) for s in range(0, 1200, 1)] + [
        (T0 + s, "nvml", "gpu0", "device_util_pct", 60.0 + (s % 7)) for s in range(0, 1200, 1)
    ]
    scenario = scenario_for_stages([stage], kind="soak", slo={"p99_ms": 995.0, "error_budget_pct": 1.0})
    folder = write_run(root, [], telemetry, [stage], scenario=scenario)
    write_requests_parquet(folder, pa.table(columns, schema=table.schema))
    return folder


@pytest.mark.parametrize("seed", [5, 6])
def test_soak_run_with_edge_cases_equals_the_reference(tmp_path: Path, seed: int) -> None:
    analysis = check_equal(_soak_run(tmp_path / f"soak-{seed}", 9_000, seed))
    summary = analysis.summary
    assert summary.soak is not None and summary.soak.minutes >= 15
    assert summary.outage_windows and summary.dropped_rows["null_latency"] > 0
    assert summary.totals.errors_by_kind.get("connection_refused", 0) > 0
    assert summary.soak_minutes is not None and summary.soak_minutes.rss_slope_mb_per_h == pytest.approx(
        720.0, rel=0.01
    )  # 0.2 MB/s from the service RSS telemetry


def test_runs_larger_than_one_pass_give_the_same_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path of a 100M-row run changes nothing: rows read from Parquet by every query (not held in a
    table), order statistics selected by DuckDB (not from sorted values), split into passes."""
    folder = _soak_run(tmp_path / "soak", 6_000, 7)
    whole = analyse_folder(folder)
    assert views.row_count([folder.requests]) < views.IN_MEMORY_BELOW_ROWS  # `whole` took the small-run path
    monkeypatch.setattr(views, "IN_MEMORY_BELOW_ROWS", 0)
    monkeypatch.setattr(ooc, "SORTED_PASS_VALUES", 0)
    monkeypatch.setattr(ooc, "PASS_VALUES", 700)  # every sample, band and series slice its own pass
    assert ooc.passes({"a": 600, "b": 100, "c": 900}) == [["b", "a"], ["c"]]
    sliced = check_equal(folder)
    assert sliced.figures.model_dump() == whole.figures.model_dump()
    assert sliced.summary.model_dump() == whole.summary.model_dump()


def test_comparison_samples_are_bounded_and_its_points_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = synthesize(tmp_path / "synth", n_requests=8_000, n_devices=1, hours=0.1, seed=9)
    analysis = analyse_folder(folder)
    monkeypatch.setattr(ooc_samples, "MAX_LATENCY_SAMPLES", 300)
    samples = ooc_samples.step_samples(analysis)
    again = ooc_samples.step_samples(analysis)
    for step in analysis.summary.steps:
        got = samples[step.stats.index]
        assert np.array_equal(got.latency_sorted, again[step.stats.index].latency_sorted)  # seeded
        assert len(got.latency_sorted) == min(300, step.stats.n_ok)
        assert got.exact_ms == {
            50.0: step.stats.latency.p50_ms,
            95.0: step.stats.latency.p95_ms,
            99.0: step.stats.latency.p99_ms,
        }
        assert got.ok_counts.sum() == step.stats.n_ok

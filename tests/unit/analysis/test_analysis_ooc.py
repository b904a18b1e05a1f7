"""The out-of-core engine equals the in-memory analysis: percentiles bit for bit, means to float tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.cli.synth import synth_request_chunks
from analysis.engine import minute_series, views
from analysis.engine import requests as ooc
from analysis.engine import telemetry as ooc_telemetry
from analysis.engine.order_stats import bootstrap_percentile_ci, exact_percentiles
from analysis.figures.bootstrap import interval, resampled_percentiles, rng_for
from analysis.model.steps import OUTCOME_OK
from embedperf.schema import (
    REQUEST_SCHEMA,
    RunFolder,
    StageRecord,
    write_requests_parquet,
    write_telemetry_parquet,
)
from tests.golden.builders import telemetry_table
from tests.oracles.in_memory.figures import decompose, soak_trends
from tests.oracles.in_memory.load import load_requests
from tests.oracles.in_memory.steps import prepare_requests, step_stats

T0 = 1_780_000_000.0
FALLBACK = "m-int8"


def _stages(open_loop: bool) -> list[StageRecord]:
    return [
        StageRecord(
            index=i, label=f"s{i}", users=None if open_loop else u, rate=50.0 * u if open_loop else None,
            start_unix_s=T0 + 60 * i, end_unix_s=T0 + 60 * (i + 1) if i < 3 else None, warmup_s=5.0,
        )
        for i, u in enumerate((1, 10, 50, 100))
    ]  # fmt: skip


def _with_edge_cases(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    """Rows the preparation must treat specially: lost stage tags, probes, timeouts by text, no latency."""
    n = table.num_rows
    cols = {name: table.column(name).to_pylist() for name in REQUEST_SCHEMA.names}
    for i in rng.choice(n, size=n // 50, replace=False):
        cols["stage_index"][i] = None
    for i in rng.choice(n, size=n // 40, replace=False):
        cols["endpoint"][i] = "validation:empty"
        cols["ok"][i] = False
        cols["status_code"][i] = 422
    for i in rng.choice(n, size=n // 100, replace=False):
        cols["ok"][i], cols["status_code"][i], cols["error"][i] = False, 0, "ReadTimeout: Timed out"
    for i in rng.choice(n, size=n // 200, replace=False):
        cols["latency_ms"][i] = None
    for i in rng.choice(n, size=n // 300, replace=False):
        cols["t_sent_unix_s"][i] = cols["t_done_unix_s"][i] = cols["latency_ms"][i] = None
        cols["ok"][i], cols["error"][i] = False, "dropped: generator behind schedule"
    for i in rng.choice(n, size=n // 100, replace=False):
        cols["t_sent_unix_s"][i] = cols["t_intended_unix_s"][i] + rng.uniform(0.0, 0.05)
    for i in rng.choice(n, size=n // 20, replace=False):  # answers of the fallback model
        cols["served_model"][i] = FALLBACK
    for i in rng.choice(n, size=n // 30, replace=False):  # answers naming no model, requests without an ID
        cols["served_model"][i] = cols["request_id"][i] = None
    for i in rng.choice(n, size=n // 10, replace=False):  # rerank requests: documents ranked per second
        cols["documents"][i] = int(rng.integers(1, 33))
    cols["stage_index"][0] = 7  # a stage the manifest does not know
    return pa.table(cols, schema=REQUEST_SCHEMA)


def _write_run(tmp_path: Path, open_loop: bool, n: int, seed: int) -> tuple[RunFolder, list[StageRecord]]:
    stages = _stages(open_loop)
    rng = np.random.default_rng(seed)
    closed = [
        s.model_copy(update={"users": s.users or 10, "end_unix_s": s.end_unix_s or T0 + 240}) for s in stages
    ]
    table = pa.concat_tables(synth_request_chunks(rng, "r", closed, n))
    if open_loop:
        table = table.set_column(
            table.schema.get_field_index("latency_from_intended_ms"), "latency_from_intended_ms",
            pc.multiply(table.column("latency_ms"), 1.1),
        )  # fmt: skip
    folder = RunFolder(tmp_path / f"run-{seed}").create()
    write_requests_parquet(folder, _with_edge_cases(table, rng))
    return folder, stages


@pytest.mark.parametrize(("open_loop", "n", "seed"), [(False, 6000, 1), (True, 4000, 2), (False, 400, 3)])
def test_step_figures_equal_the_in_memory_analysis(
    tmp_path: Path, open_loop: bool, n: int, seed: int
) -> None:
    folder, stages = _write_run(tmp_path, open_loop, n, seed)
    prepared = prepare_requests(load_requests(folder), stages)
    with views.connect(tmp_path) as con:
        windows = views.create_views(con, views.request_files(folder, tmp_path), stages)
        out = ooc.request_aggregates(con, stages, windows, open_loop, n_boot=500, fallback_model=FALLBACK)
    assert out.windows == prepared.windows
    assert out.dropped == prepared.dropped and out.dropped["outside_stage"] >= 1
    assert out.warmup_trimmed == prepared.warmup_trimmed
    late_and_dropped = fallback_served = 0
    for stage in stages:
        expected = step_stats(prepared, stage, open_loop, n_boot=500, fallback_model=FALLBACK)
        got = out.steps[stage.index].stats
        assert got.fallback_share is not None and set(got.served_models) <= {FALLBACK, "all-MiniLM-L6-v2"}
        fallback_served += got.served_models.get(FALLBACK, 0)
        exact = ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")
        for lat_got, lat_exp in [(got.latency, expected.latency), (got.error_latency, expected.error_latency)] + (
            [(got.open_loop.from_intended, expected.open_loop.from_intended)]  # type: ignore[union-attr]
            if open_loop else []
        ):  # fmt: skip
            assert lat_got.n == lat_exp.n
            assert {k: getattr(lat_got, k) for k in exact} == {k: getattr(lat_exp, k) for k in exact}
            assert lat_got.mean_ms == (
                None if lat_exp.mean_ms is None else pytest.approx(lat_exp.mean_ms, rel=1e-12)
            )
        assert got.p99_ci_ms == expected.p99_ci_ms
        same = {"latency", "error_latency", "server", "open_loop"}
        assert got.model_dump(exclude=same) == expected.model_dump(exclude=same)
        assert got.server.model_dump() == pytest.approx(expected.server.model_dump(), rel=1e-12)
        if open_loop:
            assert got.open_loop is not None and expected.open_loop is not None
            assert got.open_loop.model_dump(exclude={"from_intended"}) == expected.open_loop.model_dump(
                exclude={"from_intended"}
            )
            late_and_dropped += got.open_loop.n_late + got.open_loop.n_dropped
        rows = prepared.rows.iloc[prepared.slices[stage.index]]
        ok_rows = rows[(rows["outcome"].to_numpy() == OUTCOME_OK) & ~rows["probe"].to_numpy()]
        assert (
            out.steps[stage.index].cdf_ms
            == np.percentile(np.sort(ok_rows["latency_ms"].to_numpy()), ooc.CDF_LEVELS_PCT).tolist()
        )  # the CDF figure's quantiles, bit for bit
        dec_exp, dec_got = decompose(ok_rows), out.steps[stage.index].decomposition
        assert dec_exp is not None and dec_got is not None
        assert dec_got.n == dec_exp.n
        assert dec_got.parts_ms == pytest.approx(dec_exp.parts_ms, rel=1e-9, abs=1e-9)
    assert late_and_dropped > 0 or not open_loop
    assert fallback_served > 0


def test_empty_run_gives_empty_steps(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "empty").create()
    stages = _stages(False)
    with views.connect(tmp_path) as con:
        windows = views.create_views(con, views.request_files(folder, tmp_path), stages)
        out = ooc.request_aggregates(con, stages, windows, open_loop=False)
    assert [s.stats.n_requests for s in out.steps.values()] == [0, 0, 0, 0]
    assert out.steps[0].stats.warnings == ["no_samples"] and out.steps[0].decomposition is None


def test_order_statistics_percentiles_match_numpy_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 10, 999, 20_000):
        values = np.sort(rng.lognormal(3, 1, n))

        def order_stats(ranks: list[int], values: np.ndarray = values) -> dict[int, float]:
            return {k: float(values[k]) for k in ranks}

        pcts = [0.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0]
        assert exact_percentiles(n, pcts, order_stats) == np.percentile(values, pcts).tolist()
        replicates = resampled_percentiles(values, 99.0, 300, rng_for(4))
        assert bootstrap_percentile_ci(n, 99.0, order_stats, 300, seed=4) == interval(replicates)


def test_minute_series_equal_the_in_memory_soak_series(tmp_path: Path) -> None:
    folder, stages = _write_run(tmp_path, False, 8000, 4)
    prepared = prepare_requests(load_requests(folder), stages)
    steady = prepared.rows[~prepared.rows["probe"].to_numpy()]
    expected = soak_trends(steady, np.array([]), np.array([])).per_minute
    with views.connect(tmp_path) as con:
        views.create_views(con, views.request_files(folder, tmp_path), stages)
        t0, points = minute_series.request_minutes(con)
        batches = minute_series.batch_histograms(con)
        errors = minute_series.top_errors(con)
    assert t0 == float(np.nanmin(steady["t_sent_unix_s"]))
    assert [p.minute for p in points] == [m["minute"] for m in expected]
    for point, exp in zip(points, expected, strict=True):
        assert (point.p50_ms, point.p99_ms) == (
            pytest.approx(exp["p50_ms"], rel=1e-12),
            pytest.approx(exp["p99_ms"], rel=1e-12),
        )
        assert point.error_rate == pytest.approx(exp["error_rate"], abs=1e-12)
    for stage in stages:
        rows = prepared.rows.iloc[prepared.slices[stage.index]]
        ok = (rows["outcome"].to_numpy() == OUTCOME_OK) & ~rows["probe"].to_numpy()
        assert ok.any()
        batch = rows["batch_size"].dropna().astype(int).value_counts().to_dict()
        assert batches[stage.index] == batch
    failed = prepared.rows[
        (prepared.rows["outcome"].to_numpy() != OUTCOME_OK) & ~prepared.rows["probe"].to_numpy()
    ]
    assert sum(n for _, n in errors) == len(failed) and errors[0][1] >= errors[-1][1]


def _soak_telemetry(tmp_path: Path, throttle: bool) -> tuple[Path, list[minute_series.MinutePoint]]:
    minutes = 60
    ts = np.arange(T0, T0 + minutes * 60.0)
    frac = (ts - T0) / (minutes * 60.0)
    temp = 50.0 + (20.0 if throttle else 0.0) * frac
    clock = 1800.0 * (1.0 - (0.2 if throttle else 0.0) * frac)
    rss = 1000.0 + 200.0 * frac  # +200 MB/h: growth
    rows = []
    for device in ("npu0.chip0", "npu1.chip0"):
        rows += [(t, "npu_smi", device, "temp_c", v) for t, v in zip(ts, temp, strict=True)]
        rows += [(t, "npu_smi", device, "clock_mhz", v) for t, v in zip(ts, clock, strict=True)]
        rows += [(t, "npu_smi", device, "power_w", 200.0) for t in ts]
        rows += [(t, "npu_smi", device, "device_util_pct", 80.0) for t in ts]
    rows += [(t, "psutil", "proc:service", "rss_mb", v) for t, v in zip(ts, rss, strict=True)]
    folder = RunFolder(tmp_path / f"tel-{throttle}").create()
    write_telemetry_parquet(folder, telemetry_table(rows))
    points = [
        minute_series.MinutePoint(minute=m, qps=10.0, goodput_qps=10.0, error_rate=0.0, p50_ms=10.0, p99_ms=20.0 + (m if throttle else 0))
        for m in range(minutes)
    ]  # fmt: skip
    return folder.telemetry, points


@pytest.mark.parametrize("throttle", [True, False])
def test_soak_findings_from_telemetry_minutes(tmp_path: Path, throttle: bool) -> None:
    telemetry, points = _soak_telemetry(tmp_path, throttle)
    with views.connect(tmp_path) as con:
        ooc_telemetry.create_view(con, [telemetry])
        minute_series.prepare_telemetry_minutes(con, T0)
        minute_series.add_telemetry_minutes(con, points)
    assert points[0].power_w == pytest.approx(400.0) and points[0].device_util_pct == pytest.approx(80.0)
    assert points[-1].service_rss_mb == pytest.approx(1000.0 + 200.0 * 59.5 / 60.0, rel=1e-3)
    found = minute_series.soak_findings(points)
    assert found.memory_growth and found.rss_slope_mb_per_h == pytest.approx(200.0, rel=0.02)
    assert found.thermal_throttling is throttle
    assert found.latency_drift is throttle
    if throttle:
        assert found.temp_rise_c is not None and found.temp_rise_c > 10
        assert found.clock_change_pct is not None and found.clock_change_pct < -10


def test_inputs_under_one_row_group_are_analysed_on_one_thread(tmp_path: Path) -> None:
    """The rows of every input file count together, read from the Parquet footers."""
    almost = tmp_path / "almost.parquet"
    pq.write_table(pa.table({"x": np.arange(views.ONE_THREAD_BELOW_ROWS - 1)}), almost)
    one_more = tmp_path / "one.parquet"
    pq.write_table(pa.table({"x": np.arange(1)}), one_more)
    assert views.threads_for([]) == 1
    assert views.threads_for([almost]) == 1
    assert views.threads_for([almost, one_more]) == views.THREADS == 2

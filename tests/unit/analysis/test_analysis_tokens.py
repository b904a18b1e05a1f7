"""Input tokens per second beside QPS (steps, comparison) and latency binned by input length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.compare.changes import compare_samples
from analysis.compare.samples import step_samples
from analysis.run.analyse import analyse_folder
from embedperf.schema import RunFolder, StageRecord
from tests.golden.builders import T0_UNIX_S, ok_row, write_run


def _run(root: Path, tokens_per_request: int, slow_long: bool = False) -> RunFolder:
    """20 s, 10 requests per second; inputs alternate 20 and about tokens_per_request tokens."""
    rng = np.random.default_rng(tokens_per_request)
    rows = []
    for i in range(200):
        jitter = 0 if slow_long else int(rng.integers(-10, 11))
        tokens = 20 if i % 2 else tokens_per_request + jitter
        latency_ms = 10.0 + (tokens if slow_long else 0.0)
        rows.append(ok_row(0, T0_UNIX_S + i * 0.1, latency_ms, input_tokens=tokens))
    stage = StageRecord(
        index=0, label="users=10", users=10, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 20.0
    )
    return write_run(root, rows, [], [stage])


def test_step_tokens_per_second(tmp_path: Path) -> None:
    stats = analyse_folder(_run(tmp_path / "a", 100), n_boot=50).summary.steps[0].stats
    assert stats.tokens_per_s == pytest.approx(stats.qps * 60.0, rel=0.02)  # mean of 20 and 100 tokens


def test_comparison_reports_tokens_per_second(tmp_path: Path) -> None:
    base = step_samples(analyse_folder(_run(tmp_path / "a", 100), n_boot=50))[0]
    cand = step_samples(analyse_folder(_run(tmp_path / "b", 300), n_boot=50))[0]
    change = compare_samples(base, cand, n_boot=200, seed=1)["tokens_per_s"]
    assert change.base == pytest.approx(600, rel=0.05) and change.cand == pytest.approx(1600, rel=0.05)
    assert change.verdict == "better"


def test_latency_by_input_length_separates_short_and_long(tmp_path: Path) -> None:
    analysis = analyse_folder(_run(tmp_path / "a", 300, slow_long=True), n_boot=50)
    bins = analysis.figures.lengths
    assert [b.lo_tokens for b in bins] == [20, 300] and sum(b.n for b in bins) == 200
    assert bins[0].p50_ms == pytest.approx(30.0) and bins[1].p99_ms == pytest.approx(310.0)

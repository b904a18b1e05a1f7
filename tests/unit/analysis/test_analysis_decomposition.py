"""Latency decomposition: each part equals the mean of its own source column over the timed rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.model.decomposition import COMPONENTS
from analysis.run.analyse import analyse_folder
from tests.golden.fixtures import golden_copy
from tests.oracles.in_memory.figures import decompose


def test_parts_in_golden_run(tmp_path) -> None:
    summary = analyse_folder(golden_copy("known_percentiles", tmp_path), n_boot=50).summary
    d = summary.steps[0].decomposition
    assert d is not None
    assert d.total_ms == pytest.approx(500.5)
    assert d.parts_ms["client_network"] == pytest.approx(2.0)
    assert d.parts_ms["tokenize"] == pytest.approx(1.0) and d.parts_ms["post"] == pytest.approx(0.5)
    assert d.parts_ms["queue"] == pytest.approx(0.2 * 500.5)
    assert d.parts_ms["compute"] == pytest.approx(0.5 * 500.5)
    assert d.parts_ms["server_other"] == pytest.approx(500.5 - 2.0 - 0.7 * 500.5 - 1.5)


def test_each_part_against_its_source_column() -> None:
    """Rows without a server total (a proxy dropped the header) are left out of every part; a missing
    stage counts as 0 ms; server_other is what the server timed outside the four named stages."""
    rng = np.random.default_rng(3)
    n = 500
    latency = rng.uniform(5, 50, n)
    total = latency - rng.uniform(0.5, 2, n)
    total[:25] = np.nan
    queue, tokenize, compute = total * 0.3, rng.uniform(0.1, 1.0, n), total * rng.uniform(0.2, 0.5, n)
    post = np.where(rng.random(n) < 0.1, np.nan, total * 0.05)
    rows = pd.DataFrame(
        {
            "latency_ms": latency,
            "srv_total_ms": total,
            "srv_queue_ms": queue,
            "srv_tokenize_ms": tokenize,
            "srv_compute_ms": compute,
            "srv_post_ms": post,
        }
    )
    d = decompose(rows)
    assert d is not None and set(d.parts_ms) == set(COMPONENTS)
    timed = ~np.isnan(total)
    assert d.n == n - 25
    assert d.total_ms == pytest.approx(latency[timed].mean())
    assert d.parts_ms["client_network"] == pytest.approx((latency - total)[timed].mean())
    assert d.parts_ms["queue"] == pytest.approx(queue[timed].mean())
    assert d.parts_ms["tokenize"] == pytest.approx(tokenize[timed].mean())
    assert d.parts_ms["compute"] == pytest.approx(compute[timed].mean())
    assert d.parts_ms["post"] == pytest.approx(np.nan_to_num(post)[timed].mean())
    other = total - queue - tokenize - compute - np.nan_to_num(post)
    assert d.parts_ms["server_other"] == pytest.approx(other[timed].mean())
    assert d.parts_pct["compute"] == pytest.approx(d.parts_ms["compute"] / d.total_ms * 100.0)


def test_no_server_timing_gives_none() -> None:
    nan = np.full(3, np.nan)
    rows = pd.DataFrame(
        {"latency_ms": [1.0, 2.0, 3.0]}
        | {f"srv_{c}_ms": nan for c in ("total", "queue", "tokenize", "compute", "post")}
    )
    assert decompose(rows) is None

"""Latency decomposition: measured parts sum to the total."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.decomposition import COMPONENTS, decompose
from analysis.summary import analyse_folder
from tests.golden.fixtures import golden_copy


def test_parts_sum_to_mean_latency_in_golden_run(tmp_path) -> None:
    summary = analyse_folder(golden_copy("known_percentiles", tmp_path), n_boot=50).summary
    d = summary.steps[0].decomposition
    assert d is not None
    assert d.total_ms == pytest.approx(500.5)
    assert sum(d.parts_ms.values()) == pytest.approx(d.total_ms)
    assert sum(d.parts_pct.values()) == pytest.approx(100.0)
    assert d.parts_ms["client_network"] == pytest.approx(2.0)
    assert d.parts_ms["queue"] == pytest.approx(0.2 * 500.5)
    assert d.parts_ms["compute"] == pytest.approx(0.5 * 500.5)
    assert d.parts_ms["server_other"] == pytest.approx(500.5 - 2.0 - 0.7 * 500.5 - 1.5)


def test_random_rows_sum_exactly() -> None:
    rng = np.random.default_rng(3)
    n = 500
    latency = rng.uniform(5, 50, n)
    total = latency - rng.uniform(0.5, 2, n)
    rows = pd.DataFrame(
        {
            "latency_ms": latency,
            "srv_total_ms": total,
            "srv_queue_ms": total * 0.3,
            "srv_tokenize_ms": total * 0.1,
            "srv_compute_ms": total * 0.5,
            "srv_post_ms": np.where(rng.random(n) < 0.1, np.nan, total * 0.05),
        }
    )
    d = decompose(rows)
    assert d is not None and set(d.parts_ms) == set(COMPONENTS)
    assert sum(d.parts_ms.values()) == pytest.approx(latency.mean())


def test_no_server_timing_gives_none() -> None:
    nan = np.full(3, np.nan)
    rows = pd.DataFrame(
        {"latency_ms": [1.0, 2.0, 3.0]}
        | {f"srv_{c}_ms": nan for c in ("total", "queue", "tokenize", "compute", "post")}
    )
    assert decompose(rows) is None

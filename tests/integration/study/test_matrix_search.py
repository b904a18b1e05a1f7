"""A matrix measured by capacity search: each configuration a fresh target with a known limit, ranked by it.

The "service" of each configuration is the stub server (k workers x fixed service time: a limit of
k / service time), started fresh per configuration in place of the reference service; the searches,
run folders, summary.json and the matrix report are the real ones.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest

import study.matrix.run
from loadgen.processes.stub_target import running_stub
from study.matrix.report import build_matrix_report, load_rows
from study.matrix.run import MatrixRecord, run_matrix
from study.matrix.spec import MatrixSpec

SERVICE_MS = 20.0
LIMIT_RPS = {"two-workers": 2 / (SERVICE_MS / 1000.0), "four-workers": 4 / (SERVICE_MS / 1000.0)}  # 100, 200


class StubService:
    """Stands in for ServiceProcess: the configuration's service flags go to a fresh stub server."""

    started: list[list[str]] = []

    def __init__(self, args: list[str], **_: Any) -> None:
        self.args = args
        self._stack = contextlib.ExitStack()
        self.url = ""

    def __enter__(self) -> StubService:
        StubService.started.append(self.args)
        self.url = self._stack.enter_context(running_stub(*self.args))
        return self

    def __exit__(self, *_: Any) -> None:
        self._stack.close()


def test_matrix_ranks_configurations_by_searched_capacity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(study.matrix.run, "ServiceProcess", StubService)
    spec = MatrixSpec.model_validate(
        {
            "scenario": "query",
            "measure": "search",
            "slo_p99_ms": 500,
            "baseline": {"delay_ms": SERVICE_MS},
            "search": {
                "start_rate": 60,
                "precision": 0.2,
                "confidence": 0.6,  # a short probe (~170 ok answers) still bounds its P99 interval
                "min_ok_requests": 170,
                "min_probe_s": 1.0,
                "max_probe_s": 4.0,
                "warmup_s": 0.3,
                "max_duration_s": 90,
            },
            "configurations": [
                {"name": "two-workers", "service": {"workers": 2}},
                {"name": "four-workers", "service": {"workers": 4}},
            ],
            "scenario_overrides": {"open_loop.arrival": "constant"},
        }
    )
    folder = run_matrix(spec, tmp_path / "runs", check_precision=False, log=print)
    record = MatrixRecord.read(folder)
    assert [(r.config, r.ok) for r in record.runs] == [("two-workers", True), ("four-workers", True)], (
        record.runs
    )
    assert StubService.started[-2:] == [
        ["--delay-ms", "20.0", "--workers", "2"],
        ["--delay-ms", "20.0", "--workers", "4"],
    ]
    rows = {row.name: row for row in load_rows(folder, record)}
    for name, row in rows.items():
        # at_slo: a rate within the precision above the answer sat at the SLO (a busy host's noise there);
        # the answer and its bracket are held to the same bounds either way
        assert row.search_status in ("found", "at_slo"), name
        low, high = row.searched_bracket
        assert row.searched_rps == low and low is not None and high is not None
        assert low <= LIMIT_RPS[name] * 1.05 and (high - low) / high <= 0.2, (name, low, high)
    assert rows["four-workers"].searched_rps > rows["two-workers"].searched_bracket[1]
    html = build_matrix_report(folder).read_text(encoding="utf-8")
    ranking = re.search(r'<table id="matrix-search">(.*?)</table>', html, re.S)
    assert ranking is not None
    assert ranking.group(1).index("four-workers") < ranking.group(1).index("two-workers")
    recommendation = re.search(r"<h2>Recommendation</h2>\s*<p><b>(.*?)</b>", html, re.S)
    assert recommendation is not None and recommendation.group(1).startswith(
        "four-workers: the highest searched"
    )

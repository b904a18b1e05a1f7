"""`embedperf search` against a target with a known limit: k workers, fixed service time s -> k/s req/s."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from analysis.search import read_search
from embedperf.cli import main
from embedperf.schema import open_run_folder, read_manifest, read_requests_table
from loadgen.stub_server import running_stub

WORKERS = 4
SERVICE_MS = 40.0
TRUE_LIMIT_RPS = WORKERS / (SERVICE_MS / 1000.0)  # 100 req/s: beyond it the queue grows without bound


def test_search_finds_the_saturation_limit_within_ten_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The SLO (1 s) is far above the service time, so the limit is the saturation rate k/s: below it
    # every answer comes back in ~s, above it goodput stays at k/s while the offered rate grows.
    with running_stub("--delay-ms", str(SERVICE_MS), "--workers", str(WORKERS)) as url:
        code = main(
            [
                "search",
                "query",
                "--host",
                url,
                "--runs-dir",
                str(tmp_path),
                "--no-collectors",
                "--arrival",
                "constant",
                "--slo-p99-ms",
                "1000",
                "--start-rate",
                "60",
                "--min-ok-requests",
                "400",
                "--min-probe-s",
                "3",
                "--max-probe-s",
                "8",
                "--precision",
                "0.08",
                "--set",
                "search.warmup_s=0.5",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    folder = open_run_folder(
        next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("run folder: "))
    )
    manifest = read_manifest(folder)
    record = read_search(manifest)
    assert record is not None and record.answer_rps is not None
    assert abs(record.answer_rps - TRUE_LIMIT_RPS) / TRUE_LIMIT_RPS <= 0.10, record.model_dump_json(indent=1)
    # every probe is one stage, in run order, and its rows carry that stage
    assert [s.index for s in manifest.stages] == list(range(len(record.probes)))
    assert [s.rate for s in manifest.stages] == [p.rate for p in record.probes]
    rows = read_requests_table(folder, ["stage_index", "target_rate"]).to_pandas()
    assert set(rows["stage_index"]) == set(range(len(record.probes)))
    assert any(p.verdict == "fail" for p in record.probes) and record.probes[-1].phase == "confirm"
    answer_line = f"{record.answer_rps:.1f} req/s per device at P99 <= 1000 ms"
    assert f"capacity: {answer_line}" in out
    report = html.unescape(folder.report.read_text(encoding="utf-8"))
    assert "capacity-search" in report and answer_line in report
    assert main(["capacity", str(folder.root), "--target-qps", "1000"]) == 0
    assert f"capacity search: {answer_line}" in capsys.readouterr().out

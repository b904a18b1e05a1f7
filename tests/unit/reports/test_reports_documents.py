"""A rerank run's step table shows documents per second beside requests and tokens per second; summary.json
and steps.csv carry the same figure; a run of single-text requests shows no such column.

Built through the writers (tests/golden/builders.write_run); the out-of-core engine and the in-memory
reference must agree (as every figure of the analysis does), and both must equal the figure worked out here.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from embedperf.schema import RunFolder, StageRecord
from reports.build import build_report
from tests.golden.builders import T0_UNIX_S, ok_row, write_run
from tests.unit.analysis.test_analysis_served_and_slowest import both_engines

STAGES = [
    StageRecord(
        index=0, label="u1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 10, warmup_s=0.0
    ),
    StageRecord(
        index=1, label="u4", users=4, start_unix_s=T0_UNIX_S + 10, end_unix_s=T0_UNIX_S + 20, warmup_s=0.0
    ),
]


def rerank_run(root: Path, documents: bool = True) -> RunFolder:
    """Step u1: 50 ok rankings of 4 documents (20 documents/s); u4: 100 of 8 and a failed one of 8 that does
    not count (80 documents/s). Every request reports 30 input tokens."""
    rows = []
    for i in range(50):
        rows.append(
            ok_row(0, T0_UNIX_S + 0.1 + i * 0.19, 12.0, users=1, documents=4, n_inputs=5, input_tokens=30)
        )
    for i in range(100):
        rows.append(
            ok_row(1, T0_UNIX_S + 10.1 + i * 0.09, 20.0, users=4, documents=8, n_inputs=9, input_tokens=30)
        )
    rows.append(
        ok_row(1, T0_UNIX_S + 15.0, 5.0, users=4, documents=8, ok=False, status_code=200, error="wrong count")
    )
    if not documents:
        rows = [{**r, "documents": None} for r in rows]
    return write_run(root, rows, [], STAGES)


def _steps_table(html: str) -> list[str]:
    match = re.search(r'<table id="steps-table">(.*?)</table>', html, re.S)
    assert match is not None
    return re.findall(r"<tr[^>]*>(.*?)</tr>", match.group(1), re.S)


@pytest.mark.parametrize(("lang", "title"), [("en", "Documents/s"), ("zh", "文档/s")])
def test_documents_per_second_stand_beside_requests_and_tokens_per_second(
    tmp_path: Path, lang: str, title: str
) -> None:
    folder = rerank_run(tmp_path / "run")
    steps = [s.stats for s in both_engines(folder).steps]
    assert [s.documents_per_s for s in steps] == [pytest.approx(20.0), pytest.approx(80.0)]
    assert [s.tokens_per_s for s in steps] == [pytest.approx(150.0), pytest.approx(300.0)]
    html = build_report(folder, lang=lang).read_text(encoding="utf-8")
    header, u1, u4 = _steps_table(html)
    columns = re.findall(r"<th[^>]*>(.*?)</th>", header)
    assert columns[3:5] == [columns[3], title] and "req/s" in columns[3]  # right after goodput
    assert header.count("<th") == u1.count("<td") == u4.count("<td")
    assert (
        '<td data-col="documents_per_s">20.0</td>' in u1 and '<td data-col="documents_per_s">80.0</td>' in u4
    )
    assert '<td data-col="tokens_per_s">150</td>' in u1
    summary = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    assert [s["stats"]["documents_per_s"] for s in summary["steps"]] == [
        pytest.approx(20.0),
        pytest.approx(80.0),
    ]
    with (folder.analysis / "steps.csv").open(encoding="utf-8") as fh:
        assert [float(r["documents_per_s"]) for r in csv.DictReader(fh)] == [
            pytest.approx(20.0),
            pytest.approx(80.0),
        ]


def test_a_run_without_documents_has_no_documents_column(tmp_path: Path) -> None:
    folder = rerank_run(tmp_path / "run", documents=False)
    assert [s.stats.documents_per_s for s in both_engines(folder).steps] == [None, None]
    html = build_report(folder).read_text(encoding="utf-8")
    assert "Documents/s" not in html and 'data-col="documents_per_s"' not in html

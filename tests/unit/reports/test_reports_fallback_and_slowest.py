"""The report shows each step's fallback share (flagged) and the slowest requests with their IDs.

Built from run folders written through the writers (tests/golden/builders.write_run); the same
figures are read back from summary.json and steps.csv, where scripts take them.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from reports.build import build_report
from tests.golden.fixtures import golden_copy
from tests.unit.analysis.test_analysis_served_and_slowest import FALLBACK, fallback_run


def _table(html: str, table_id: str) -> str:
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert match is not None, f"no table {table_id}"
    return match.group(1)


def _rows(table: str) -> list[str]:
    return re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_step_partly_served_by_the_fallback_is_flagged_with_its_share(tmp_path: Path, lang: str) -> None:
    folder = fallback_run(tmp_path / "run")
    html = build_report(folder, lang=lang).read_text(encoding="utf-8")
    summary = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    assert [s["stats"]["fallback_share"] for s in summary["steps"]] == [0.0, pytest.approx(0.3)]
    assert summary["steps"][1]["stats"]["served_models"] == {"minilm": 70, FALLBACK: 30}
    with (folder.analysis / "steps.csv").open(encoding="utf-8") as fh:
        assert [float(r["fallback_share"]) for r in csv.DictReader(fh)] == [0.0, pytest.approx(0.3)]
    header, u1, u8 = _rows(_table(html, "steps-table"))
    assert header.count("<th") == u1.count("<td") == u8.count("<td")  # the column is there, in every row
    assert "0.0%" in u1 and "⚑" not in u1
    assert "30.0%" in u8 and u8.count("⚑") == 1 and FALLBACK in u8  # the flag names the model
    assert 'id="fallback-note"' in html


def test_runs_without_the_header_show_nothing_of_the_fallback(tmp_path: Path) -> None:
    folder = fallback_run(tmp_path / "run", with_header=False)
    html = build_report(folder).read_text(encoding="utf-8")
    steps = _table(html, "steps-table")
    assert "⚑" not in html and "fallback-note" not in html and 'data-col="fallback_share"' not in steps
    summary = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    assert [s["stats"]["fallback_share"] for s in summary["steps"]] == [None, None]


def test_the_slowest_requests_list_shows_their_ids_and_models(tmp_path: Path) -> None:
    folder = fallback_run(tmp_path / "run")
    html = build_report(folder).read_text(encoding="utf-8")
    summary = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))
    listed = summary["slowest_requests"]
    assert [r["request_id"] for r in listed] == [
        *(f"b-{i}" for i in range(0, 100, 20)),
        "b-4",
        "b-9",
        "b-14",
        "b-19",
        "b-24",
    ]
    rows = _rows(_table(html, "slowest-requests"))[1:]
    shown = [re.search(r'<code class="request-id">(.*?)</code>', r).group(1) for r in rows]  # type: ignore[union-attr]
    assert shown == [r["request_id"] for r in listed]
    models = [re.search(r'served-model[^"]*">(.*?)</td>', r).group(1) for r in rows]  # type: ignore[union-attr]
    assert models == [r["served_model"] for r in listed]
    assert models == [FALLBACK] * 5 + ["minilm"] * 5
    assert [("caution" in row) for row in rows] == [True] * 5 + [False] * 5  # fallback answers stand out


def test_an_older_run_folder_lists_its_slowest_requests_without_ids(tmp_path: Path) -> None:
    folder = golden_copy("known_percentiles", tmp_path)
    html = build_report(folder).read_text(encoding="utf-8")
    rows = _rows(_table(html, "slowest-requests"))[1:]
    assert len(rows) == 10 and all('<code class="request-id">n/a</code>' in r for r in rows)
    assert "served-model" not in html and "⚑" not in html

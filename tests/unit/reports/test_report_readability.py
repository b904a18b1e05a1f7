"""Report cells a reader can trust: shares capped at 100% with the measured value footnoted, empty
cells as n/a (never "— / —%"), and a comparison header that names only what differs."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

from embedperf.schema import HostInfo, RunFolder, ServiceInfo, StageRecord
from reports.build import build_report
from reports.compare_build import build_comparison
from reports.config_diff import ConfigChange, config_difference
from reports.i18n import CATALOGUE
from reports.tables import ShareCells
from tests.golden.builders import T0_UNIX_S, ok_row, stepped_run, write_run

TAG = re.compile(r"<[^>]+>")
CONFIG = {"batching": True, "max_batch_size": 32, "max_wait_ms": 5}


def section(html: str, start: str) -> str:
    """The table that starts with `start`, plus the note right after it, as plain text."""
    found = re.search(
        re.escape(start) + r".*?</table>(?:\s*</div>)?\s*(?:<p class=\"note[^\"]*\">.*?</p>)?", html, re.S
    )
    assert found, f"{start} missing from the report"
    return html_lib.unescape(re.sub(r"\s+", " ", TAG.sub(" ", found.group(0))))


def cells(html: str, table_id: str) -> list[list[str]]:
    table = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html, re.S)
    assert table, table_id
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(0), re.S)
    return [
        [html_lib.unescape(TAG.sub("", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in rows
    ]


def busy_run(root: Path, busy_pct: float) -> RunFolder:
    """Two steps; the second's device reads busy_pct, the service process 250% CPU (2.5 cores)."""
    stages, rows, telemetry = [], [], []
    for i, (users, util) in enumerate([(1, 40.0), (8, busy_pct)]):
        start = T0_UNIX_S + i * 20
        stages.append(
            StageRecord(index=i, label=f"users={users}", users=users, start_unix_s=start, end_unix_s=start + 20,
                        warmup_s=1.0)
        )  # fmt: skip
        rows += [ok_row(i, start + 1 + 0.05 * k, 20.0, users=users) for k in range(380)]
        for s in range(1, 20):  # inside the step: the first step's window never sees the second's samples
            telemetry += [
                (start + s, "npu_smi", "npu0.chip0", "device_util_pct", util),
                (start + s, "psutil", "proc:service", "cpu_util_pct", 250.0),
            ]
    info = {"model": "m", "device": "npu:0", "precision": "fp16", "devices": [{"kind": "npu", "index": 0}]}
    return write_run(root, rows, telemetry, stages, service_info=info)


def test_a_busy_share_over_100_is_shown_capped_with_the_measured_value_below() -> None:
    cells_ = ShareCells()
    assert cells_.cell(99.96, "s", "ev_device_busy_pct", "%") == "100.0%"  # rounding is not capping
    assert cells_.capped == []
    assert cells_.cell(100.04, "s", "ev_device_busy_pct", "%") == "100.0%*"
    assert cells_.cell(None, "s", "ev_device_busy_pct", "%") == "n/a"
    assert [(c.step, c.measured_pct) for c in cells_.capped] == [("s", 100.0)]


def test_report_caps_device_busy_at_100_and_footnotes_102_6(tmp_path: Path) -> None:
    html = build_report(busy_run(tmp_path / "busy", 102.6)).read_text(encoding="utf-8")
    bottlenecks = section(html, '<table id="bottlenecks">')
    assert "device busy 100.0%*" in bottlenecks
    assert "device busy 102.6%" not in bottlenecks.split("Measured")[0]  # never in a cell
    assert "Measured: users=8 device busy 102.6%" in bottlenecks
    assert CATALOGUE["capped_note"][0] in bottlenecks
    telemetry = cells(html, "telemetry")
    assert telemetry[2][1] == "100.0* / 100.0*"  # users=8, device util. mean / max
    assert telemetry[1][1] == "40.0 / 40.0"  # users=1: nothing capped, no mark
    assert telemetry[2][8] == "250.0"  # service CPU is % of one core: 2.5 cores, not capped
    assert "users=8 device utilisation 102.6%" in section(html, '<table id="telemetry">')
    assert CATALOGUE["cpu_core_note"][0] in html


def test_report_without_a_capped_share_has_no_cap_note(tmp_path: Path) -> None:
    html = build_report(busy_run(tmp_path / "busy", 95.0)).read_text(encoding="utf-8")
    assert 'class="note capped"' not in html and "100.0%*" not in html
    assert "device busy 95.0%" in section(html, '<table id="bottlenecks">')


def test_cells_with_nothing_measured_read_na(tmp_path: Path) -> None:
    """No telemetry at all, and a dead target: every such cell is one n/a, never '— / —%'."""
    for folder in (
        stepped_run(tmp_path / "no-telemetry", [1, 2, 4, 8], 6.0),
        stepped_run(tmp_path / "dead", [1, 5], 6.0, refused=True),
    ):
        html = build_report(folder).read_text(encoding="utf-8")
        every_cell = [cell for table in re.findall(r'<table[^>]*id="([^"]+)"', html) for row in cells(html, table)
                      for cell in row]  # fmt: skip
        assert every_cell and [c for c in every_cell if "—" in c] == []
        telemetry = cells(html, "telemetry")[1:]
        assert telemetry and all(cell == "n/a" for row in telemetry for cell in row[1:8])
    dead = cells(html, "bottlenecks")[1:]
    assert [row[1:] for row in dead] == [[CATALOGUE["bn_no_data"][0], "n/a"]] * 2
    assert all(row[-2] == "n/a" for row in cells(html, "steps-detail")[1:])  # P99 CI of no ok request
    assert 'alt="Latency CDF' not in html  # no ok answer: no empty CDF with an empty legend


def test_compare_header_names_only_the_keys_that_differ(tmp_path: Path) -> None:
    base = stepped_run(
        tmp_path / "base", [1, 4], 6.0, service_info={"model": "m", "precision": "fp32", "config": CONFIG}
    )
    cand = stepped_run(
        tmp_path / "cand", [1, 4], 6.0, seed=1,
        service_info={"model": "m", "precision": "fp16", "config": {**CONFIG, "max_batch_size": 64}},
    )  # fmt: skip
    same = stepped_run(
        tmp_path / "same",
        [1, 4],
        6.0,
        seed=2,
        service_info={"model": "m", "precision": "fp32", "config": CONFIG},
    )
    html = build_comparison(base, [cand], out=tmp_path / "diff.html")[0].read_text(encoding="utf-8")
    header = section(html, '<table class="kv" id="runs">')
    assert "config.max_batch_size 32 → 64" in header and "precision fp32 → fp16" in header
    assert "max_wait_ms" not in header and "batching" not in header  # unchanged keys are not dumped
    assert CATALOGUE["same_config"][0] not in header
    html = build_comparison(base, [same], out=tmp_path / "same.html")[0].read_text(encoding="utf-8")
    header = section(html, '<table class="kv" id="runs">')
    assert CATALOGUE["same_config"][0] in header and "max_batch_size" not in header


def test_config_difference_covers_added_removed_and_host_keys() -> None:
    base = ServiceInfo.model_validate({"model": "m", "config": {"cache": "off", "threads": 4}})
    cand = ServiceInfo.model_validate({"model": "m", "config": {"threads": 8, "sort": True}})
    assert config_difference(base, HostInfo(hostname="a"), cand, HostInfo(hostname="b")) == [
        ConfigChange("config.cache", "off", "n/a"),
        ConfigChange("config.threads", "4", "8"),
        ConfigChange("host.hostname", "a", "b"),
        ConfigChange("config.sort", "n/a", "True"),
    ]
    assert config_difference(base, None, base, None) == []

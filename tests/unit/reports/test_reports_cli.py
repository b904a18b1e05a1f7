"""CLI entry points: report (--latest), capacity, compare and its gate exit codes."""

from __future__ import annotations

import re
import shutil

import pytest

from embedperf.cli import main as embedperf
from tests.golden.fixtures import GOLDEN_DIR, golden_copy


def test_report_latest_prints_path(tmp_path, capsys) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(GOLDEN_DIR / "compare_base", runs / "20260101T000000Z-a")
    shutil.copytree(GOLDEN_DIR / "known_percentiles", runs / "20260102T000000Z-b")
    assert embedperf(["report", "--latest", "--runs-dir", str(runs), "--lang", "zh"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.endswith("20260102T000000Z-b/report.zh.html")
    assert (runs / "20260102T000000Z-b" / "report.zh.html").is_file()
    assert not (runs / "20260102T000000Z-b" / "report.html").exists()  # zh goes beside en, never over it
    assert not (runs / "20260101T000000Z-a" / "report.zh.html").exists()


def test_report_on_a_missing_folder_is_one_line(tmp_path, capsys) -> None:
    assert embedperf(["report", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_capacity_plan(tmp_path, capsys) -> None:
    """compare_base: P99 297 / 659 / 2208 / 5037 ms at 1 / 10 / 50 / 100 users on 2 NPUs."""
    folder = golden_copy("compare_base", tmp_path)
    args = ["capacity", str(folder.root), "--slo-p99-ms", "1000", "--target-qps", "1000", "--headroom-pct", "25"]
    assert embedperf(args) == 0
    out = capsys.readouterr().out
    retired = [*args[:-2], "--headroom", "0.25", "--error-budget", "0.5"]  # fractions, the old unit
    assert embedperf(retired) == 0
    old = capsys.readouterr()
    assert re.search(r"for 1000 QPS with 25% headroom: \d+ replica\(s\) x 2 device\(s\)", old.out)
    assert "--headroom (fraction) is deprecated; use --headroom-pct 25" in old.err
    assert "--error-budget (fraction) is deprecated; use --error-budget-pct 50" in old.err
    assert "highest QPS meeting the SLO: 36.6 (load 10)" in out
    assert "no step meets the SLO" not in out
    assert "Little's law step 3: users 100" in out
    assert re.search(r"for 1000 QPS with 25% headroom: \d+ replica\(s\) x 2 device\(s\)", out)
    assert embedperf(["capacity", str(folder.root), "--slo-p99-ms", "100"]) == 1  # the SLO failed
    out = capsys.readouterr().out
    assert "no step meets the SLO" in out and "highest QPS meeting the SLO" not in out


def test_compare_gate_exit_codes(tmp_path, capsys) -> None:
    base = golden_copy("compare_base", tmp_path)
    faster = golden_copy("compare_faster", tmp_path)
    same = golden_copy("compare_same", tmp_path)
    gate = "p99_ms:+5%,qps:-3%"
    budget = ["--error-budget-pct", "1"]  # the golden candidates fail 0.2-0.5% of requests at users=100
    assert (
        embedperf(["compare", str(base.root), str(faster.root), str(same.root), "--gate", gate, *budget]) == 0
    )
    path = capsys.readouterr().out.strip()
    assert path == str(faster.root / "compare-compare_base.html")
    html = (faster.root / "compare-compare_base.html").read_text()
    assert "compare_faster" in html and "compare_same" in html
    assert "http" not in html and "//cdn" not in html
    out = tmp_path / "cmp.html"
    assert (
        embedperf(["compare", str(faster.root), str(base.root), "--gate", gate, *budget, "--out", str(out)])
        == 1
    )
    assert "gate failed" in capsys.readouterr().err
    assert out.is_file()


@pytest.mark.parametrize("gate", ["p99:+5%", "qps:3%"])
def test_compare_rejects_a_bad_gate(tmp_path, capsys, gate: str) -> None:
    base = golden_copy("compare_base", tmp_path)
    assert embedperf(["compare", str(base.root), str(base.root), "--gate", gate]) == 2
    assert "gate" in capsys.readouterr().err


def test_compare_prints_its_verdict_first(tmp_path, capsys) -> None:
    """The verdict is the first line; the last is still its first reason (CI logs read it)."""
    base = golden_copy("compare_base", tmp_path)
    same = golden_copy("compare_same", tmp_path)
    out = str(tmp_path / "c.html")
    assert embedperf(["compare", str(base.root), str(same.root), "--gate", "p99_ms:+5%", "--out", out]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "embedperf compare: verdict: fail (1 failed rule(s) and step(s), below)"
    assert err[-1].startswith("embedperf compare: error: gate failed: compare_same: error_budget:0.1%")


def test_compare_warnings_are_counted_and_each_reason_said_once() -> None:
    from analysis.compare.changes import CandidateComparison, Comparison, StepComparison, _change
    from analysis.compare.reasons import reason
    from reports.compare_cli import warning_lines

    short = reason("short_steady", have=4.6, need=10)
    steps = [
        StepComparison(
            index=i, label=f"u{u}", base_load=u, cand_load=u, base_n_ok=9, cand_n_ok=9,
            metrics={m: _change(m, 1.0, 2.0, (0.5, 1.5), short) for m in ("qps", "unavailable_s")},
        )  # fmt: skip
        for i, u in enumerate((1, 10, 50, 100))
    ]
    cand = CandidateComparison(run_id="c", label="c", steps=steps, overall=steps[-1], mismatches=[])
    lines = warning_lines(Comparison(base_run_id="b", base_label="b", candidates=[cand], rules=[]))
    assert lines[0] == "8 warning(s): changes without a verdict, 1 distinct reason(s):"
    assert lines[1:] == [
        "  4.6 s of steady state < 10 needed: qps@u1, unavailable_s@u1, qps@u10, unavailable_s@u10, qps@u50, "
        "unavailable_s@u50, qps@u100, unavailable_s@u100"
    ]

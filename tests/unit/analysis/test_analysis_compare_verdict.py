"""`embedperf compare` never passes what it cannot judge, and one regression is one failure line.

Run folders are built through the writers (tests/golden/builders.py): a ramp at users 1, 10, 50, 100,
a smoke run with fewer, different steps, and ramps that differ from the baseline at users=100 only
(slower, no requests at all, every request failed).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from analysis.compare.changes import compare_runs
from analysis.run.analyse import analyse_folder
from embedperf.cli import main as embedperf
from embedperf.schema import RunFolder, StageRecord
from tests.golden.builders import REFUSED, T0_UNIX_S, ok_row, write_run

REPO = Path(__file__).resolve().parents[3]
RAMP = [1, 10, 50, 100]
SMOKE = [1, 10, 20]
STEP_S = 15.0
QPS_PER_USER = 10.0  # users=1: ~140 ok requests in 14 s of steady state, enough for a P99
LATENCY_MS = 20.0
TOP = RAMP[-1]


def ramp(
    root: Path,
    users: list[int],
    seed: int,
    slow_at: dict[int, float] | None = None,
    empty_at: int | None = None,
    refused_at: int | None = None,
) -> RunFolder:
    """A closed-loop run through the writers; `slow_at` multiplies latency at some loads, `empty_at`
    sends nothing at one load, `refused_at` fails every request at one load."""
    rng = np.random.default_rng(seed)
    stages, rows = [], []
    for i, u in enumerate(users):
        start = T0_UNIX_S + i * STEP_S
        stages.append(
            StageRecord(
                index=i,
                label=f"users={u}",
                users=u,
                start_unix_s=start,
                end_unix_s=start + STEP_S,
                warmup_s=1.0,
            )
        )
        if u == empty_at:
            continue
        scale = (slow_at or {}).get(u, 1.0)
        for t in np.sort(rng.uniform(start, start + STEP_S, int(QPS_PER_USER * u * STEP_S))):
            if u == refused_at:
                failed = dict.fromkeys(("srv_total_ms", "srv_queue_ms", "srv_tokenize_ms", "srv_compute_ms"))
                failed |= {"srv_post_ms": None, "batch_size": None, "status_code": None}
                rows.append(ok_row(i, float(t), 1.0, users=u, ok=False, error=REFUSED, **failed))
            else:
                latency_ms = LATENCY_MS * scale * float(rng.uniform(0.8, 1.2))
                rows.append(ok_row(i, float(t), latency_ms, users=u))
    return write_run(root, rows, [], stages)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunFolder]:
    root = tmp_path_factory.mktemp("verdict")
    return {
        "ramp": ramp(root / "ramp", RAMP, seed=1),
        "ramp2": ramp(root / "ramp2", RAMP, seed=2),
        "smoke": ramp(root / "smoke", SMOKE, seed=3),
        "slow_top": ramp(root / "slow_top", RAMP, seed=4, slow_at={TOP: 1.5}),
        "empty_top": ramp(root / "empty_top", RAMP, seed=5, empty_at=TOP),
        "refused_top": ramp(root / "refused_top", RAMP, seed=6, refused_at=TOP),
    }


def compare(
    runs: dict[str, RunFolder], tmp_path: Path, base: str, cand: str, *extra: str, lang: str = "en"
) -> tuple[int, dict, Path]:
    out, data = tmp_path / f"{base}-{cand}.html", tmp_path / f"{base}-{cand}.json"
    code = embedperf(
        [
            "compare",
            str(runs[base].root),
            str(runs[cand].root),
            "--out",
            str(out),
            "--json",
            str(data),
            "--lang",
            lang,
            *extra,
        ]
    )
    return code, json.loads(data.read_text()), out


def failure_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "gate failed" in line]


def test_ramp_against_smoke_gives_no_verdict_without_gate(runs, tmp_path, capsys) -> None:
    code, data, _ = compare(runs, tmp_path, "ramp", "smoke")
    err = capsys.readouterr().err
    assert code == 2, err
    assert data["status"] == "no_verdict" and data["exit_code"] == 2
    reasons = data["candidates"][0]["no_verdict_reasons"]
    assert reasons == [
        "baseline step users=50 has no candidate step at the same load",
        "baseline step users=100 has no candidate step at the same load",
        "candidate step users=20 has no baseline step at the same load",
    ]
    for reason in reasons:
        assert f"embedperf compare: no verdict: smoke: {reason}" in err
    assert not failure_lines(err)
    assert compare(runs, tmp_path, "ramp", "smoke", "--gate", "p99_ms:+10%")[0] == 2  # with --gate alike


def test_a_step_without_requests_gives_no_verdict_with_or_without_gate(runs, tmp_path, capsys) -> None:
    for extra in ([], ["--gate", "qps:-5%,p99_ms:+10%"]):
        code, data, _ = compare(runs, tmp_path, "ramp", "empty_top", *extra)
        err = capsys.readouterr().err
        assert code == 2, err
        assert data["candidates"][0]["no_verdict_reasons"] == [
            f"step users={TOP} has no ok requests in the candidate"
        ]
        assert not failure_lines(err)


def test_a_step_whose_requests_all_failed_never_passes(runs, tmp_path, capsys) -> None:
    """The error budget judges it (exit 1, one line); with a budget of 100% it still has no verdict."""
    code, data, _ = compare(runs, tmp_path, "ramp", "refused_top", "--gate", "qps:-5%,p99_ms:+10%")
    lines = failure_lines(capsys.readouterr().err)
    assert code == 1
    assert len(lines) == 1 and f"error_budget:1% at users={TOP}" in lines[0] and "100.000%" in lines[0]
    assert data["candidates"][0]["failures"] == [lines[0].split("refused_top: ", 1)[1]]
    code, data, _ = compare(runs, tmp_path, "ramp", "refused_top", "--error-budget-pct", "100")
    assert code == 2 and data["status"] == "no_verdict"
    assert data["candidates"][0]["no_verdict_reasons"] == [
        f"step users={TOP} has no ok requests in the candidate"
    ]


def test_a_single_p99_regression_prints_one_failure_line(runs, tmp_path, capsys) -> None:
    code, data, _ = compare(runs, tmp_path, "ramp", "slow_top", "--gate", "p99_ms:+10%,qps:-5%")
    captured = capsys.readouterr()
    lines = failure_lines(captured.out + captured.err)
    assert code == 1, captured.err
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"embedperf compare: error: gate failed: slow_top: p99_ms:+10% at users={TOP}: "
    )
    assert re.search(r"change \+\d+\.\d%", lines[0]) and "rule p99_ms:+10%" in lines[0]
    cand = data["candidates"][0]
    assert len(cand["failures"]) == 1 and cand["overall_step"] == f"users={TOP}"


def test_healthy_pair_passes_and_its_zh_report_says_so(runs, tmp_path, capsys) -> None:
    code, data, out = compare(runs, tmp_path, "ramp", "ramp2", "--gate", "p99_ms:+10%,qps:-5%", lang="zh")
    assert code == 0, capsys.readouterr().err
    assert data["status"] == "pass"
    assert "通过" in out.read_text(encoding="utf-8")


def test_zh_report_shows_no_pass_mark_without_a_verdict(runs, tmp_path, capsys) -> None:
    code, _, out = compare(runs, tmp_path, "ramp", "smoke", lang="zh")
    assert code == 2
    html = out.read_text(encoding="utf-8")
    assert "通过" not in html
    assert html.count("无结论") >= 2  # the summary row and the candidate's heading
    banner = html[html.index('id="no-verdict-1"') :]
    assert (
        "baseline step users=100 has no candidate step at the same load" in banner[: banner.index("</div>")]
    )


def test_overall_is_the_highest_shared_load_for_every_metric(runs) -> None:
    """The smoke run shares users=1 and 10 with the ramp; the ramp peaks at users=100. Overall is users=10,
    every metric from that one step (not the baseline's peak, not all steps pooled)."""
    base, smoke = analyse_folder(runs["ramp"], n_boot=200), analyse_folder(runs["smoke"], n_boot=200)
    cand = compare_runs(base, [smoke], n_boot=200).candidates[0]
    assert [s.label for s in cand.steps] == ["users=1", "users=10"]
    assert cand.overall_step == "users=10"
    assert cand.overall.metrics == cand.steps[1].metrics
    ten = next(s.stats for s in base.summary.steps if s.stats.label == "users=10")
    assert cand.overall.metrics["p99_ms"].base == ten.latency.p99_ms


@pytest.mark.slow  # runs `make compare` three times
def test_make_compare_keeps_the_exit_code_the_readme_promises(runs, tmp_path) -> None:
    """make turns any failing recipe into 2; the comparison's own code lands in CAND/compare.exit."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert (
        "`make compare` itself exits 0 when the comparison passes and 2 otherwise (GNU make turns any "
        "failing recipe into 2)" in readme
    )
    assert "it writes the comparison's own exit code to `CAND/compare.exit`" in readme
    stamp = tmp_path / "setup-stamp"
    stamp.touch()  # newer than pyproject.toml: `setup` has nothing to do
    cases = {"slow_top": (2, "1"), "smoke": (2, "2"), "ramp2": (0, "0")}
    for cand, (make_code, compare_code) in cases.items():
        exit_file = runs[cand].root / "compare.exit"
        exit_file.unlink(missing_ok=True)
        made = subprocess.run(
            ["make", "--no-print-directory", "-C", str(REPO), "compare", f"BASE={runs['ramp'].root}",
             f"CAND={runs[cand].root}", "GATE=p99_ms:+10%,qps:-5%", f"OUT={tmp_path / cand}.html",
             f"STAMP={stamp}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert made.returncode == make_code, made.stderr[-2000:]
        assert exit_file.read_text().strip() == compare_code, cand

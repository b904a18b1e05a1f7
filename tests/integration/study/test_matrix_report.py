"""The matrix report over run folders with known effects: changes, verdicts, precision exclusion, recommendation."""

from __future__ import annotations

import re
import time
from pathlib import Path

from analysis.cli.synth import synthesize
from analysis.compare.changes import MetricChange
from analysis.run.analyse import analyse_folder
from embedperf.schema import RunFolder
from study.matrix.report import build_matrix_report, merge_verdicts, recommend
from study.matrix.run import MatrixRecord, MatrixRun

SPEC = {
    "scenario": "ramp",
    "profile": "quick",
    "configurations": [
        {"name": "baseline", "description": "no batching"},
        {"name": "fast", "description": "twice as fast, same numerics"},
        {"name": "faster-but-wrong", "description": "even faster, embeddings off"},
    ],
}


def _matrix(tmp_path: Path) -> Path:
    folder = tmp_path / "matrix"
    runs = folder / "runs"
    scales = {"baseline": 1.0, "fast": 0.5, "faster-but-wrong": 0.3}
    record = MatrixRecord(spec=SPEC, repeat=1, started_unix_s=time.time(), finished_unix_s=time.time())
    for order, (name, scale) in enumerate(scales.items()):
        synthesize(runs / name, n_requests=4000, n_devices=1, hours=0.05, seed=order, latency_scale=scale)
        record.runs.append(
            MatrixRun(
                config=name,
                repeat=0,
                order=order,
                run_dir=f"runs/{name}",
                ok=True,
                service_args=["--batching"] if name != "baseline" else ["--no-batching"],
            )
        )
    record.precision = {
        "faster-but-wrong": {
            "passed": False,
            "cosine_mean": 0.71,
            "cosine_min": 0.2,
            "topk": 10,
            "topk_agreement_mean": 0.4,
        },
    }
    folder.mkdir(exist_ok=True)
    record.write(folder)
    return folder


def test_matrix_report_shows_effects_and_never_recommends_a_precision_failure(tmp_path: Path) -> None:
    folder = _matrix(tmp_path)
    html = build_matrix_report(folder).read_text()
    assert "Failed the precision gate, so never recommended: faster-but-wrong." in html
    recommendation = re.search(r"<h2>Recommendation</h2>\s*<p><b>(.*?)</b>", html, re.S)
    assert recommendation is not None
    assert recommendation.group(1).startswith("fast:") or "fast (" in recommendation.group(1)
    assert "faster-but-wrong:" not in recommendation.group(1)
    # The fast configuration's QPS change is a significant gain.
    assert 'class="better"' in html
    assert "http://" not in html and "https://" not in html


def test_chinese_matrix_report(tmp_path: Path) -> None:
    html = build_matrix_report(_matrix(tmp_path), lang="zh").read_text()
    assert "优化矩阵" in html and "推荐" in html


def _change(verdict: str) -> MetricChange:
    return MetricChange(
        metric="qps", base=1.0, cand=2.0, diff=1.0, rel=1.0, ci_low=0.5, ci_high=1.5, verdict=verdict
    )


def test_repeats_must_agree_for_a_verdict() -> None:
    assert merge_verdicts([_change("better"), _change("better")]) == "better"
    assert merge_verdicts([_change("better"), _change("no_difference")]) == "no_verdict"
    assert merge_verdicts([_change("worse"), _change("better")]) == "no_verdict"


def test_run_report_shows_a_stored_precision_check(tmp_path: Path) -> None:
    import json

    from reports.build import build_report

    folder: RunFolder = synthesize(tmp_path / "run", n_requests=500, n_devices=1, hours=0.02)
    assert "Precision (mean cosine vs fp32)" not in build_report(folder).read_text()
    folder.precision.write_text(
        json.dumps(
            {
                "candidate": "int8 <b>build</b>",
                "reference": "fp32",
                "n_texts": 150,
                "cosine_mean": 0.9957,
                "cosine_min": 0.98,
                "cosine_p1": 0.981,
                "topk": 10,
                "topk_agreement_mean": 0.93,
                "topk_agreement_min": 0.6,
                "profile": "standard",
                "gate_min_mean_cosine": 0.99,
                "passed": True,
            }
        )
    )
    html = build_report(folder).read_text()
    assert "Precision (mean cosine vs fp32)" in html and "0.99570" in html
    assert "int8 &lt;b&gt;build&lt;/b&gt;" in html


def _row(name: str, folder: Path, precision: dict[str, object] | None, needs_check: bool, **analysis: float):
    from study.matrix.report import ConfigRow

    return ConfigRow(
        name=name,
        description="",
        service_args=[],
        runs=[analyse_folder(RunFolder(folder), n_boot=50, **analysis)],
        precision=precision,
        is_baseline=False,
        needs_precision_check=needs_check,
    )


def test_recommendation_needs_a_passed_check_and_the_error_budget(tmp_path: Path) -> None:
    """An unchecked int8 is not 'passed'; with no configuration at the SLO the fallback still keeps
    the error budget (with a zero budget, every step of the fast run is over it)."""
    slow = synthesize(tmp_path / "slow", n_requests=4000, n_devices=1, hours=0.05, seed=1).root
    fast = synthesize(
        tmp_path / "fast", n_requests=20_000, n_devices=1, hours=0.05, seed=2, latency_scale=0.5
    ).root
    never_meets = {"slo_p99_ms": 0.001}
    unchecked = _row("int8-unchecked", fast, None, True, error_budget=0.01, **never_meets)
    checked = _row("int8-checked", fast, {"passed": True}, True, error_budget=0.01, **never_meets)
    fp32 = _row("fp32", slow, None, False, error_budget=0.01, **never_meets)
    assert not unchecked.precision_ok and checked.precision_ok and fp32.precision_ok
    assert recommend([fp32, unchecked])[0] is fp32
    assert recommend([fp32, checked])[0] is checked
    # seed 2: every step of the fast run fails at least one request, so a zero budget excludes them all
    over_budget = _row("fast-but-failing", fast, None, False, error_budget=0.0, **never_meets)
    assert over_budget.peak_qps is not None and fp32.peak_qps is not None
    assert over_budget.peak_qps > fp32.peak_qps and over_budget.qps_within_budget is None
    best, basis = recommend([fp32, over_budget])
    assert best is fp32 and basis == "peak"
    assert recommend([over_budget]) == (None, "none")

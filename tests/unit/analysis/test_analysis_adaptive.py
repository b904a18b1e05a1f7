"""Adaptive steps in the analysis: each step's ending reaches the summary and report, and a step that never
converged makes the capacity answer and the comparison at it uncertain."""

from __future__ import annotations

from pathlib import Path

from analysis.cli.capacity import format_plan
from analysis.compare.changes import compare_runs
from analysis.run.analyse import analyse_folder
from embedperf.schema import RunFolder, StepEnding, read_manifest, write_manifest
from reports.build import build_report
from tests.golden.builders import stepped_run


def adaptive_run(root: Path, unconverged: set[int], seed: int = 0) -> RunFolder:
    """A 3-step ramp whose steps were adaptive: those in `unconverged` reached their longest time."""
    folder = stepped_run(root, [1, 2, 4], 20.0, seed=seed, slo={"p99_ms": 100.0, "error_budget_pct": 1.0})
    manifest = read_manifest(folder)
    for stage in manifest.stages:
        converged = stage.index not in unconverged
        stage.ending = StepEnding(
            reason="converged" if converged else "max_time", target_rel_width=0.1, n_ok=400, p99_ms=23.0,
            p99_ci_low_ms=22.0, p99_ci_high_ms=23.5 if converged else 40.0, rel_width=0.065 if converged else 0.78,
        )  # fmt: skip
    write_manifest(folder, manifest)
    return folder


def test_every_step_says_why_it_ended_and_an_unconverged_capacity_is_uncertain(tmp_path: Path) -> None:
    summary = analyse_folder(adaptive_run(tmp_path / "run", unconverged={2})).summary
    assert [s.ending.reason for s in summary.steps if s.ending] == ["converged", "converged", "max_time"]
    assert summary.capacity.unconverged_steps == [2] and summary.capacity.max_step_index == 2
    assert summary.capacity.uncertain
    text = format_plan(summary)
    assert "step users=4: max time, never converged" in text and "UNCERTAIN" in text
    settled = analyse_folder(adaptive_run(tmp_path / "settled", unconverged=set())).summary
    assert not settled.capacity.uncertain and "UNCERTAIN" not in format_plan(settled)


def test_the_report_shows_each_ending_and_flags_the_unconverged(tmp_path: Path) -> None:
    folder = adaptive_run(tmp_path / "run", unconverged={2})
    html = build_report(folder).read_text(encoding="utf-8")
    assert (
        'id="adaptive"' in html and "max time: never converged" in html and 'id="headline-uncertain"' in html
    )
    assert "未收敛" in build_report(folder, lang="zh").read_text(encoding="utf-8")


def test_compare_gives_no_verdict_at_a_step_that_never_converged(tmp_path: Path) -> None:
    base = analyse_folder(adaptive_run(tmp_path / "base", unconverged=set()))
    cand = analyse_folder(adaptive_run(tmp_path / "cand", unconverged={1}, seed=1))
    steps = {s.label: s for s in compare_runs(base, [cand], n_boot=50).candidates[0].steps}
    assert all(
        m.verdict == "no_verdict" and "never converged" in (m.warning or "")
        for m in steps["users=2"].metrics.values()
    )
    assert not any("never converged" in (m.warning or "") for m in steps["users=1"].metrics.values())

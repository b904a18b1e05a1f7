"""`embedperf canary`'s plan: the scenario's load held through one step per stage, flags as scenario fields."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from embedperf.canary_record import CanaryRecord, read_canary_record, write_canary_record
from embedperf.errors import ConfigError
from scenarios.loader import load_scenario
from study.canary.cli import _limit, _stages, build_parser, canary_overrides, settle_incomplete


def test_every_stage_holds_the_load_step_for_its_windows() -> None:
    planned = load_scenario("smoke", overrides={"canary.window_s": "2", "canary.windows_per_stage": "3"})
    overrides = canary_overrides(planned, {"canary.window_s": "2", "canary.windows_per_stage": "3"})
    scenario = load_scenario("smoke", overrides=overrides)
    assert scenario.canary.enabled
    assert [s.label for s in scenario.steps] == ["5%", "20%", "50%", "100%"]
    assert {s.users for s in scenario.steps} == {4}  # smoke's last step
    assert {(s.duration_s, s.warmup_s) for s in scenario.steps} == {(6.0, 0.0)}


def test_an_open_loop_canary_holds_the_chosen_steps_rate() -> None:
    planned = load_scenario("openloop", overrides={"canary.load_step": "1", "canary.stages_pct": "[10, 100]"})
    scenario = load_scenario(
        "openloop",
        overrides=canary_overrides(planned, {"canary.load_step": "1", "canary.stages_pct": "[10, 100]"}),
    )
    assert [(s.label, s.rate) for s in scenario.steps] == [("10%", 50.0), ("100%", 50.0)]


def test_a_load_step_the_scenario_lacks_is_refused_with_the_valid_range() -> None:
    planned = load_scenario("smoke", overrides={"canary.load_step": "5"})
    with pytest.raises(ConfigError, match=r"--load-step 0\.\.1"):
        canary_overrides(planned, {})


def test_a_canary_scenario_needs_one_step_per_stage() -> None:
    with pytest.raises(ConfigError, match="one step per stage"):
        load_scenario("smoke", overrides={"canary.enabled": "true"})  # 2 steps, 4 stages


def test_flags_parse_to_scenario_values_and_off_disables_a_trigger() -> None:
    assert _limit("off") == "null" and _limit("1.5") == "1.5"
    assert _stages("10, 50,100") == "[10.0, 50.0, 100.0]"
    with pytest.raises(argparse.ArgumentTypeError):
        _limit("fast")
    with pytest.raises(argparse.ArgumentTypeError):
        _stages("5,twenty")
    args = build_parser().parse_args(["--baseline", "http://a:1", "--candidate", "http://b:2"])
    assert args.scenario == "query" and args.label == "canary"
    epilog = build_parser().epilog or ""
    assert "0 promote" in epilog and "3 incomplete" in epilog


def test_a_run_that_ended_while_running_is_recorded_incomplete(tmp_path: Path) -> None:
    record = CanaryRecord(
        baseline_url="http://a",
        candidate_url="http://b",
        stages_pct=[5, 100],
        window_s=2,
        windows_per_stage=2,
    )
    write_canary_record(tmp_path, record)
    settled = settle_incomplete(tmp_path, record)
    assert settled.status == "incomplete" and settled.exit_code == 3
    assert settled.line == "INCOMPLETE: the run stopped after 0 of 4 windows"
    stored = read_canary_record(tmp_path)
    assert stored is not None and stored.status == "incomplete"
    promoted = record.model_copy(update={"status": "promote"})
    assert settle_incomplete(tmp_path, promoted) is promoted


def test_baseline_and_candidate_at_the_same_url_are_refused() -> None:
    from study.canary.cli import main

    with pytest.raises(ConfigError, match="same target"):
        main(["smoke", "--baseline", "http://127.0.0.1:9/v1", "--candidate", "http://127.0.0.1:9/"])


def test_help_prints_percent_signs_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "100%)" in out and "%%" not in out


def test_the_report_shows_the_verdict_word_once() -> None:
    from reports.canary_section import line_detail

    assert line_detail("PROMOTE: 2 stages x 3 windows", "promote") == ": 2 stages x 3 windows"
    assert line_detail("ROLL BACK at stage 2 (20%), window 3: x", "rollback") == " at stage 2 (20%), window 3: x"
    assert line_detail("something else", "no_verdict") == ": something else"

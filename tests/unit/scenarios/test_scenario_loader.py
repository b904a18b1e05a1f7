"""Scenario files: shipped ones validate; typos name the file, field and valid choices; overrides apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedperf.errors import ConfigError
from scenarios.loader import env_overrides, load_scenario, parse_overrides, shipped_scenarios


@pytest.mark.parametrize("name", ["ramp", "openloop", "soak", "spike", "smoke", "query", "indexing"])
def test_shipped_scenarios_validate(name: str) -> None:
    assert name in shipped_scenarios()
    scenario = load_scenario(name, environ={})
    assert scenario.name == name
    assert all(s.duration_s > s.warmup_s for s in scenario.steps)


def test_ramp_is_1_10_50_100_and_quick_profile_shortens_steps() -> None:
    full = load_scenario("ramp", profile="full", environ={})
    quick = load_scenario("ramp", profile="quick", environ={})
    assert [s.users for s in full.steps] == [1, 10, 50, 100]
    assert {s.duration_s for s in full.steps} == {60}
    assert [s.users for s in quick.steps] == [1, 10, 50, 100]
    assert {(s.duration_s, s.warmup_s) for s in quick.steps} == {(15, 3)}
    assert quick.profile == "quick"


def test_misspelt_field_names_file_field_and_choices(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("name: typo\nkind: ramp\nsteps:\n  - {users: 1, duraton_s: 5}\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path), environ={})
    message = str(err.value)
    assert str(path) in message
    assert "steps.0.duraton_s" in message
    assert "did you mean 'duration_s'" in message
    assert "warmup_s" in message  # valid choices listed


def test_unknown_kind_lists_valid_kinds(tmp_path: Path) -> None:
    path = tmp_path / "kind.yaml"
    path.write_text("kind: rmap\nsteps:\n  - {users: 1, duration_s: 5}\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path), environ={})
    assert "did you mean 'ramp'" in str(err.value)
    assert "openloop" in str(err.value)


def test_unknown_top_level_section_and_open_loop_without_rate(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: openloop\ntraget: {}\nsteps:\n  - {users: 1, duration_s: 5}\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path), environ={})
    assert "did you mean 'target'" in str(err.value)


def test_unknown_scenario_name_suggests() -> None:
    with pytest.raises(ConfigError, match="did you mean 'ramp'"):
        load_scenario("rampp", environ={})


def test_overrides_broadcast_index_and_precedence() -> None:
    overrides = parse_overrides(["steps.duration_s=5", "steps.1.users=7", "target.base_url=http://h:1"])
    scenario = load_scenario(
        "ramp",
        profile="quick",
        overrides=overrides,
        environ={"EMBEDPERF_SCENARIO__STEPS__DURATION_S": "9", "EMBEDPERF_SCENARIO__SLO__P99_MS": "120"},
    )
    assert {s.duration_s for s in scenario.steps} == {5}  # --set beats env beats profile
    assert scenario.steps[1].users == 7
    assert scenario.target.base_url == "http://h:1"
    assert scenario.slo.p99_ms == 120  # from the environment


def test_override_of_unknown_field_is_an_error() -> None:
    with pytest.raises(ConfigError, match="did you mean 'duration_s'"):
        load_scenario("smoke", overrides={"steps.durationn_s": "3"}, environ={})


def test_bad_override_syntax_and_out_of_range_index() -> None:
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_overrides(["steps.duration_s"])
    with pytest.raises(ConfigError, match="out of range"):
        load_scenario("smoke", overrides={"steps.9.users": "3"}, environ={})


def test_env_override_keys() -> None:
    assert env_overrides({"EMBEDPERF_SCENARIO__OPEN_LOOP__ARRIVAL": "poisson", "OTHER": "x"}) == {
        "open_loop.arrival": "poisson"
    }


def test_unknown_profile_lists_profiles() -> None:
    with pytest.raises(ConfigError, match="quick"):
        load_scenario("ramp", profile="quik", environ={})


def test_an_invalid_override_names_the_override_not_the_file() -> None:
    with pytest.raises(ConfigError) as info:
        load_scenario("smoke", overrides={"steps.duration_s": "abc"}, environ={})
    first = str(info.value).splitlines()[0]
    assert first == "--set steps.duration_s=abc: invalid value" and "smoke.yaml" not in str(info.value)
    with pytest.raises(ConfigError, match=r"^EMBEDPERF_SCENARIO__SLO__P99_MS=-1: invalid value: slo\.p99_ms"):
        load_scenario("smoke", environ={"EMBEDPERF_SCENARIO__SLO__P99_MS": "-1"})
    with pytest.raises(ConfigError, match=r"^--set nosuch\.field=1: invalid value: unknown field 'nosuch'"):
        load_scenario("smoke", overrides={"nosuch.field": "1"}, environ={})


def test_an_invalid_file_still_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: ramp\nsteps: [{users: x, duration_s: 5}]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{bad}: invalid scenario: steps\.0\.users"):
        load_scenario(str(bad), overrides={"slo.p99_ms": "100"}, environ={})

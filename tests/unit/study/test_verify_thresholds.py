"""verify's one configuration section: seed defaults, a file's `verify:` section, flags over it, one error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedperf.errors import ConfigError
from study.verify.cli import build_parser, thresholds_from
from study.verify.thresholds import VerifyThresholds, parse_layers, resolve_thresholds


def test_defaults_are_the_seeds_go_live_values() -> None:
    t = VerifyThresholds()
    assert (t.min_cosine, t.strict_cosine, t.strict_action) == (0.99, 0.999, "warn")
    assert (t.slo_p99_ms, t.error_budget_pct, t.min_device_util_pct) == (300.0, 0.1, 90.0)
    assert (t.max_temp_c, t.max_device_mem_pct, t.soak_s) == (85.0, 80.0, 3600.0)
    assert t.capacity_needed_qps is None
    assert VerifyThresholds(target_qps=100, headroom_pct=25).capacity_needed_qps == 125.0


def test_the_file_section_overrides_defaults_and_flags_override_the_file(tmp_path: Path) -> None:
    config = tmp_path / "release.yaml"
    config.write_text(
        "name: other\nverify:\n  soak_s: 7200\n  target_qps: 40\n  strict_action: fail\n", encoding="utf-8"
    )
    t = resolve_thresholds(config, {"target_qps": 80.0, "slo_p99_ms": None})
    assert (t.soak_s, t.target_qps, t.strict_action, t.slo_p99_ms) == (7200.0, 80.0, "fail", 300.0)


def test_command_line_flags_set_and_strict(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["--host", "http://h:1", "--soak-s", "60", "--set", "max_p99_drift_ratio=2", "--set", "soak_scenario=smoke",
         "--strict", "--target-qps", "12"]
    )  # fmt: skip
    t = thresholds_from(args)
    assert (t.soak_s, t.max_p99_drift_ratio, t.soak_scenario, t.strict_action, t.target_qps) == (
        60.0,
        2.0,
        "smoke",
        "fail",
        12.0,
    )


def test_every_problem_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_thresholds(None, {"min_cosine": 1.5, "soak_windows": 1, "no_such_field": 3})
    text = str(raised.value)
    assert "min_cosine" in text and "soak_windows" in text and "no_such_field" in text
    with pytest.raises(ConfigError, match="strict_cosine 0.98 is below min_cosine 0.99"):
        resolve_thresholds(None, {"strict_cosine": 0.98})
    with pytest.raises(ConfigError, match="shorter than one soak window"):
        resolve_thresholds(None, {"soak_s": 10, "soak_windows": 5, "soak_warmup_s": 2})
    empty = tmp_path / "empty.yaml"
    empty.write_text("name: x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="has no `verify:` mapping"):
        resolve_thresholds(empty, {})


def test_layers_option() -> None:
    assert parse_layers("4,1") == (1, 4)
    assert parse_layers("1,2,3,4") == (1, 2, 3, 4)
    for bad in ("", "0", "5", "a,b"):
        with pytest.raises(ConfigError, match="layer numbers 1-4"):
            parse_layers(bad)

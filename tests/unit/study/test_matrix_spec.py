"""The matrix file: the shipped one validates, flags are derived exactly, typos are explained, order rotates."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedperf.errors import ConfigError
from study.matrix.run import precision_of, run_order
from study.matrix.spec import load_matrix_spec, service_args
from tests.conftest import REPO_ROOT


def test_shipped_matrix_is_valid_and_complete() -> None:
    spec = load_matrix_spec(REPO_ROOT / "scenarios" / "optimizations.yaml")
    names = [c.name for c in spec.configurations]
    assert names[0] == "baseline"
    for expected in ("batching", "sort", "overlap", "int8", "int8-attn", "bf16", "cache", "threads", "all"):
        assert expected in names
    baseline = spec.service_settings(spec.configurations[0])
    assert baseline["batching"] is False and baseline["precision"] == "fp32" and baseline["cache_size"] == 0
    batching = spec.service_settings(next(c for c in spec.configurations if c.name == "batching"))
    assert batching["batching"] is True and batching["max_batch_size"] == 16
    assert spec.scenario_overrides["payload.repeat_fraction"] == "0.5"
    assert (
        spec.service_settings(next(c for c in spec.configurations if c.name == "one-process"))["http_workers"]
        == 0
    )


def test_shipped_accelerator_matrix_compares_graphs_front_ends_precisions_and_caps() -> None:
    spec = load_matrix_spec(REPO_ROOT / "scenarios" / "accelerator.yaml")
    settings = {c.name: spec.service_settings(c) for c in spec.configurations}
    assert settings["graphs"]["graphs"] == "on" and settings["eager"]["graphs"] == "off"
    assert settings["one-process"]["http_workers"] == 0
    assert {s["precision"] for s in settings.values()} == {"fp16", "fp32", "bf16"}
    assert service_args(settings["eager"])[:2] == ["--device", "cuda"]


def test_service_args_follow_the_serve_flags() -> None:
    args = service_args(
        {"batching": False, "max_batch_size": 16, "precision": "int8", "int8_exclude": r"a\.b"}
    )
    assert args == [
        "--no-batching",
        "--max-batch-size",
        "16",
        "--precision",
        "int8",
        "--int8-exclude",
        r"a\.b",
    ]
    assert precision_of({"batching": True}) == "fp32"


def test_misspelt_field_names_the_file_field_and_choices(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "scenario: ramp\nconfigurations:\n  - name: baseline\n  - name: b\n    servce: {batching: true}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_matrix_spec(path)
    message = str(err.value)
    assert (
        str(path) in message and "configurations.1.servce" in message and "did you mean 'service'" in message
    )


def test_duplicate_names_and_single_configuration_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("configurations:\n  - name: a\n  - name: a\n")
    with pytest.raises(ConfigError, match="repeated: a"):
        load_matrix_spec(path)
    path.write_text("configurations:\n  - name: a\n")
    with pytest.raises(ConfigError, match="at least one other"):
        load_matrix_spec(path)


def test_selecting_keeps_the_baseline_and_rejects_unknown_names() -> None:
    spec = load_matrix_spec(REPO_ROOT / "scenarios" / "optimizations.yaml")
    assert [c.name for c in spec.select(["int8"]).configurations] == ["baseline", "int8"]
    with pytest.raises(ConfigError, match="unknown configuration"):
        spec.select(["int9"])


def test_repeats_rotate_the_order() -> None:
    spec = load_matrix_spec(REPO_ROOT / "scenarios" / "optimizations.yaml").select(["batching", "int8"])
    order = [(r, c.name) for r, c in run_order(spec.configurations, 3)]
    assert order == [
        (0, "baseline"), (0, "batching"), (0, "int8"),
        (1, "batching"), (1, "int8"), (1, "baseline"),
        (2, "int8"), (2, "baseline"), (2, "batching"),
    ]  # fmt: skip


def test_measure_search_validates_its_settings_and_needs_an_open_loop_scenario(tmp_path: Path) -> None:
    from study.matrix.run import run_matrix
    from study.matrix.spec import MatrixSpec

    spec_file = tmp_path / "m.yaml"
    spec_file.write_text(
        "scenario: query\nmeasure: search\nsearch: {precison: 0.2}\nconfigurations: [{name: a}, {name: b}]\n"
    )
    with pytest.raises(
        ConfigError, match="unknown search setting 'precison' \\(did you mean 'precision'\\?\\)"
    ):
        load_matrix_spec(spec_file)
    spec = MatrixSpec.model_validate(
        {
            "scenario": "query",
            "measure": "search",
            "search": {"precision": 0.2},
            "configurations": [{"name": "a"}, {"name": "b"}],
        }
    )
    assert spec.search_overrides() == {"search.enabled": "true", "search.precision": "0.2"}
    assert spec.model_copy(update={"measure": "steps"}).search_overrides() == {}
    closed = spec.model_copy(update={"scenario": "smoke"})
    with pytest.raises(ConfigError, match="closed loop"):
        run_matrix(closed, tmp_path / "runs", check_precision=False, log=lambda _: None)
    assert not (tmp_path / "runs").exists()  # refused before any folder or service

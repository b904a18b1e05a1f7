"""Flags -> validated configuration; source selection in auto and explicit modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.cli import build_sources, config_from_args
from embedperf.errors import ConfigError


def test_flags_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDPERF_NPU_SMI", "/opt/npu-smi")
    config = config_from_args(
        [
            "--out",
            str(tmp_path),
            "--npu-ids",
            "4,5",
            "--sources",
            "psutil,service",
            "--service-url",
            "http://h:8/",
        ]
    )
    assert config.npu_ids == (4, 5)
    assert config.sources == ("psutil", "service")
    assert config.npu_smi == "/opt/npu-smi"
    assert config.metrics_url == "http://h:8/metrics"


def test_unknown_source_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="valid: auto or a comma list of npu_smi"):
        config_from_args(["--out", str(tmp_path), "--sources", "psutil,dcgm"])


def test_auto_skips_absent_sources_with_reasons(tmp_path: Path) -> None:
    config = config_from_args(["--out", str(tmp_path), "--npu-smi", str(tmp_path / "missing-npu-smi")])
    status = {s.name: s.status.snapshot() for s in build_sources(config)}
    assert status["npu_smi"].status == "skipped"
    assert "not found" in status["npu_smi"].reason and "--npu-smi" in status["npu_smi"].reason
    assert status["service"].status == "skipped" and "--service-url" in status["service"].reason
    assert status["psutil"].status == "ok"


def test_explicit_missing_source_is_failed(tmp_path: Path) -> None:
    config = config_from_args(
        ["--out", str(tmp_path), "--sources", "npu_smi", "--npu-smi", "no-such-npu-smi"]
    )
    (source,) = build_sources(config)
    assert source.status.snapshot().status == "failed"


def test_embedperf_collect_runs_in_process(tmp_path: Path) -> None:
    from embedperf.cli import main

    assert main(["collect", "--out", str(tmp_path), "--duration", "1.5", "--sources", "psutil"]) == 0
    assert (tmp_path / "telemetry.parquet").is_file()
    assert '"name": "psutil"' in (tmp_path / "collectors.json").read_text()


def test_embedperf_collect_bad_flag_is_one_line_error(tmp_path: Path) -> None:
    from embedperf.cli import main

    assert main(["collect", "--out", str(tmp_path), "--sources", "gpu"]) == 2

"""`embedperf precision` on the real MiniLM: fp32 vs fp32, int8 within the gate, a broken build failing it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from embedperf import cli
from service.model import default_model_path


def test_fp32_against_fp32_is_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fp32.json"
    assert cli.main(["precision", "--precision", "fp32", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["cosine_mean"] == pytest.approx(1.0, abs=1e-6)
    assert result["topk_agreement_mean"] == pytest.approx(1.0)
    assert result["passed"] is True
    assert "PASS" in capsys.readouterr().out


def test_full_int8_is_close_but_below_the_gate(tmp_path: Path) -> None:
    # Dynamic int8 on every Linear layer moves MiniLM's embeddings measurably (mean cosine ~0.96 on
    # the shipped corpus): close to fp32, yet below the standard gate, so it must exit 1.
    out = tmp_path / "int8.json"
    assert cli.main(["precision", "--precision", "int8", "--out", str(out)]) == 1
    result = json.loads(out.read_text())
    assert 0.9 < result["cosine_mean"] < 0.99
    assert result["passed"] is False


def test_attention_only_int8_passes_the_gate(tmp_path: Path) -> None:
    out = tmp_path / "int8-attn.json"
    args = [
        "precision",
        "--precision",
        "int8",
        "--int8-exclude",
        r"output\.dense|intermediate",
        "--out",
        str(out),
    ]
    assert cli.main(args) == 0
    result = json.loads(out.read_text())
    assert 0.99 <= result["cosine_mean"] < 0.99999
    assert result["cosine_min"] < 1.0
    assert set(result["by_group"]) >= {"en/short", "zh/long", "mixed/short"}


def test_an_exclusion_that_matches_every_layer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["precision", "--precision", "int8", "--int8-exclude", "."]) == 2
    assert "nothing would be quantised" in capsys.readouterr().err


def _broken_copy(tmp_path: Path) -> Path:
    """The packaged model with its encoder weights replaced by random ones."""
    from transformers import AutoModel

    source = default_model_path()
    broken = tmp_path / "broken-model"
    shutil.copytree(source, broken)
    model = AutoModel.from_pretrained(str(source))
    torch.manual_seed(0)
    with torch.no_grad():
        for param in model.encoder.parameters():
            param.normal_(0.0, 0.05)
    model.save_pretrained(str(broken))
    return broken


def test_broken_build_fails_the_gate_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = _broken_copy(tmp_path)
    out = tmp_path / "broken.json"
    code = cli.main(["precision", "--candidate-model", str(broken), "--out", str(out)])
    assert code == 1
    result = json.loads(out.read_text())
    assert result["passed"] is False and result["cosine_mean"] < 0.9
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "below 0.99" in captured.err


def test_endpoint_and_candidate_model_together_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["precision", "--candidate-model", "/x", "--endpoint", "http://127.0.0.1:9"])
    assert code == 2
    assert "not both" in capsys.readouterr().err

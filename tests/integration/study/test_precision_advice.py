"""`embedperf precision --advise` on the real MiniLM: the printed expression passes when run on its own;
the module swap the advice builds its variants with is undone even when the block raises."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from embedperf import cli
from modelcore.model import load_model
from study.corpus import load_eval_corpus
from study.precision.advice import quantised_linears, swapped
from study.precision.advice_plan import ATTENTION_ONLY_EXCLUDE

# Short texts only: the scan runs the model once per Linear layer (37 times).
TEXTS = [t for t in load_eval_corpus() if t.kind != "passage"][::13]


def test_the_swapped_variant_is_the_services_int8_build() -> None:
    fp32, int8 = load_model(None, precision="fp32"), load_model(None, precision="int8")
    texts = [t.text for t in TEXTS]
    before = fp32.encode(texts)
    linears = quantised_linears(fp32, int8)
    assert len(linears) == 37  # 6 per layer and the pooler
    with swapped(fp32.network, linears):
        borrowed = fp32.encode(texts)
    np.testing.assert_array_equal(borrowed, int8.encode(texts))
    np.testing.assert_array_equal(fp32.encode(texts), before)  # fp32 is itself again


def test_the_advised_expression_passes_on_its_own_with_fewer_layers_than_attention_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = tmp_path / "texts.jsonl"
    rows = [{"id": t.id, "text": t.text, "domain": t.labels["domain"]} for t in TEXTS]
    dataset.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    data = ["--dataset", str(dataset), "--label-field", "domain"]
    out, report = tmp_path / "advice.json", tmp_path / "advice.html"
    args = ["precision", "--precision", "int8", "--advise", "--speed-rounds", "1", "--threads", "1", *data]
    threads = torch.get_num_threads()
    try:
        assert cli.main([*args, "--out", str(out), "--report", str(report)]) == 0
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out

    result = json.loads(out.read_text())
    assert result["passed"] is False  # full int8 itself fails; the advice is what passes
    advice = result["advice"]
    expression = advice["expression"]
    assert expression and advice["verified"]["failures"] == []
    assert 0 < len(advice["kept_fp32"]) < advice["attention_only_kept"] == 18
    assert (
        advice["one_fewer"]["kept_fp32"] == len(advice["kept_fp32"]) - 1 and advice["one_fewer"]["failures"]
    )
    sensitivities = [s["cosine_drop"] for s in advice["sensitivities"]]
    assert len(sensitivities) == 37 and sensitivities == sorted(sensitivities, reverse=True)
    assert {s["name"] for s in advice["sensitivities"][: len(advice["kept_fp32"])]} == set(
        advice["kept_fp32"]
    )
    speed = {s["variant"]: s for s in advice["speed"]}
    assert list(speed) == ["fp32", "int8", "advised"]
    assert speed["fp32"]["ratio_to_fp32"] == 1.0 and all(s["texts_per_s"] > 0 for s in speed.values())
    assert "interleaved round" in advice["speed_method"]

    command = (
        f"embedperf precision --precision int8 --int8-exclude {shlex.quote(expression)} {shlex.join(data)}"
    )
    assert f"check it  : {command}" in printed
    assert f"attention-only, --int8-exclude {shlex.quote(ATTENTION_ONLY_EXCLUDE)}, keeps 18" in printed
    html = report.read_text()
    assert "Which Linear layers int8 keeps in fp32" in html and "Speed, measured side by side" in html

    # The printed expression, run on its own as the user would: the gate passes.
    assert cli.main(shlex.split(command)[1:]) == 0
    assert "-> PASS" in capsys.readouterr().out


def test_a_swap_is_undone_even_when_the_block_raises() -> None:
    network = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.Linear(2, 2)))
    original = network.get_submodule("1.0")
    replacement = torch.nn.Identity()
    with pytest.raises(RuntimeError), swapped(network, {"1.0": replacement}):
        assert network.get_submodule("1.0") is replacement
        raise RuntimeError("boom")
    assert network.get_submodule("1.0") is original

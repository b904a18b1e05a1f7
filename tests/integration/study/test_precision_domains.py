"""A variant that damages one labelled domain of the user's set fails that domain while the mean passes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from embedperf import cli
from modelcore.model import load_model
from study.corpus import load_eval_corpus
from study.precision.compare import read_result
from study.precision.report import write_precision_report
from tests.fakes.perturbing_endpoint import perturbing_endpoint

MARKER = "§"
LEGAL = [
    ("legal-en-1", "Under § 4 of the lease, the tenant pays two months of rent as a deposit."),
    ("legal-en-2", "The supplier is liable under § 12 for defects reported within one year."),
    ("legal-zh-1", "根据合同§7，租户应提前一个月书面通知房东。"),
    ("legal-zh-2", "依照§3的约定，逾期付款按每日万分之五计算违约金。"),
]


def _dataset(path: Path) -> Path:
    rows = [
        {"id": t.id, "body": t.text, "domain": t.labels["domain"]}
        for t in load_eval_corpus()
        if t.kind != "passage"
    ]
    rows += [{"id": i, "body": text, "domain": "legal"} for i, text in LEGAL]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_the_damaged_domain_fails_and_the_report_lists_its_worst_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = _dataset(tmp_path / "texts.jsonl")
    out, report = tmp_path / "result.json", tmp_path / "report.html"
    with perturbing_endpoint(load_model(None), MARKER, cosine=0.9) as url:
        code = cli.main(
            [
                "precision",
                "--endpoint",
                url,
                "--dataset",
                str(dataset),
                "--field",
                "body",
                "--label-field",
                "domain",
                "--out",
                str(out),
                "--report",
                str(report),
            ]
        )
    assert code == 1
    result = json.loads(out.read_text())
    assert result["cosine_mean"] >= 0.99  # the overall mean passes ...
    failing = [d for d in result["domains"] if not d["passed"]]
    assert [(d["axis"], d["name"]) for d in failing] == [("domain", "legal")]  # ... one domain does not
    assert failing[0]["cosine_mean"] == pytest.approx(0.9, abs=1e-3)
    assert len(result["failures"]) == 1 and "domain=legal" in result["failures"][0]
    assert {w["id"] for w in result["worst"][:4]} == {i for i, _ in LEGAL}

    captured = capsys.readouterr()
    assert "domain=legal fails" in captured.out and "domain=legal" in captured.err
    html = report.read_text()
    row = re.search(r'<tr data-domain="domain=legal">(.*?)</tr>', html, re.S)
    assert row is not None
    assert 'class="fail"' in row.group(1)
    assert sum(i in row.group(1) for i, _ in LEGAL) == 3  # its three worst inputs, with their cosine
    assert re.search(r"legal-(en|zh)-\d</code> 0\.9000", row.group(1))
    worst_table = re.search(r'<table id="precision-worst">(.*?)</table>', html, re.S)
    assert worst_table is not None and all(text in worst_table.group(1) for _, text in LEGAL)
    # The result JSON alone rebuilds the same report (the typed result survives the round trip).
    assert write_precision_report(read_result(out), tmp_path / "again.html").read_text() == html

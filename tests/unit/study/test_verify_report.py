"""verify's outputs: the JSON reads back typed, JUnit counts what failed and what did not run, the HTML has a
section per layer with its line and is rendered from the JSON alone."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from study.verify.report import junit_xml, read_result, render_verify_report, write_result
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import Check, LayerResult, VerifyResult, build_result, judged


def failed_at_layer_2() -> VerifyResult:
    layers = [
        judged(
            1,
            [Check(name="mean cosine to fp32", status="pass", measured="0.999999", limit=">= 0.99")],
            {"reference set": "/tmp/ref.parquet"},
        ),
        judged(
            2,
            [
                Check(
                    name="capacity at the SLO",
                    status="fail",
                    measured="12 req/s (found)",
                    limit=">= 50 req/s",
                ),
                Check(name="serving-device utilisation", status="warn", measured="not measured"),
            ],
        ),
        LayerResult(number=3, title="stability", status="not_run", reason="layer 2 is fail"),
        LayerResult(number=4, title="operational readiness", status="not_run", reason="layer 2 is fail"),
    ]
    return build_result("http://127.0.0.1:8086", 1_700_000_000.0, 1_700_000_100.0, VerifyThresholds(target_qps=40),
                        layers, ["no --reference: wrote /tmp/ref.parquet"])  # fmt: skip


def test_json_round_trip_keeps_the_typed_result(tmp_path: Path) -> None:
    result = failed_at_layer_2()
    back = read_result(write_result(result, tmp_path / "verify.json"))
    assert back == result
    assert (back.verdict, back.exit_code, back.thresholds.target_qps) == ("fail", 1, 40.0)
    assert back.failed_layer is not None and back.failed_layer.number == 2


def test_junit_counts_failures_and_layers_not_run() -> None:
    root = ET.fromstring(junit_xml(failed_at_layer_2()))
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("5", "1", "2")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "layer 1: function and precision",
        "layer 2: performance and utilisation",
        "layer 3: stability",
        "layer 4: operational readiness",
    ]
    failure = suites[1].find("testcase/failure")
    assert (
        failure is not None
        and failure.get("message") == "capacity at the SLO: 12 req/s (found) (limit >= 50 req/s)"
    )
    warned = [c for c in suites[1].findall("testcase") if c.get("name") == "serving-device utilisation"][0]
    assert warned.find("failure") is None and (warned.findtext("system-out") or "").startswith("WARN:")


def test_the_html_has_every_layer_with_its_status_and_line() -> None:
    html = render_verify_report(failed_at_layer_2(), "en")
    assert 'data-verdict="fail"' in html and 'data-exit-code="1"' in html
    for number, status in ((1, "pass"), (2, "fail"), (3, "not_run"), (4, "not_run")):
        assert f'<section id="layer-{number}" data-status="{status}">' in html
    assert "capacity at the SLO: 12 req/s (found) (limit &gt;= 50 req/s)" in html
    assert "no --reference: wrote /tmp/ref.parquet" in html
    assert "http://" not in html.replace("http://127.0.0.1:8086", "")  # self-contained: no external URL
    zh = render_verify_report(failed_at_layer_2(), "zh")
    assert "功能与精度" in zh and "未执行" in zh

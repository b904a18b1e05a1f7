"""A capacity-search run's report and summary.json: the searched answer as the headline, in both languages."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from analysis.cli.synth import synthesize
from analysis.compare.quality_gate import QualityGate, QualityStep
from analysis.model.lengths import LengthBin
from decisions.search.state import SearchRecord
from embedperf.schema import Manifest, RunFolder, read_manifest, write_manifest
from reports import figures, search_section
from reports.build import build_report
from reports.i18n import CATALOGUE
from reports.render import render
from tests.golden.builders import SEARCH_LIMIT_RPS, SEARCH_SLO_MS, search_record

LIMIT_RPS = SEARCH_LIMIT_RPS
SLO_MS = SEARCH_SLO_MS
# Words a zh heading may keep: units, acronyms and figure names shared by both languages.
KEPT = {
    "P50",
    "P90",
    "P95",
    "P99",
    "P99.9",
    "SLO",
    "CPU",
    "QPS",
    "req/s",
    "ms",
    "token",
    "token/s",
    "fp32",
    "Git",
    "UTC",
}
KEPT |= {"Little"}  # Little's law


def _search_run(tmp_path: Path, limit_rps: float = LIMIT_RPS) -> tuple[RunFolder, SearchRecord]:
    """A run folder with manifest.search, written through the writers (synth rows + the manifest writer)."""
    folder = synthesize(tmp_path / "run", n_requests=2000, n_devices=2, hours=0.02)
    record = search_record(limit_rps)
    manifest = read_manifest(folder)
    raw = manifest.model_dump(mode="json") | {"search": record.model_dump(mode="json")}
    write_manifest(folder, Manifest.model_validate(raw))
    return folder, record


def _headings(text: str) -> list[str]:
    """Section headings and column names (h1 is the scenario's own name)."""
    cells = re.findall(r"<(h[23]|th)[^>]*>(.*?)</\1>", text, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", " ", body)).strip() for _, body in cells]


def _english_words(heading: str) -> list[str]:
    return [w for w in re.findall(r"[A-Za-z][A-Za-z/.0-9]+", heading) if w not in KEPT and len(w) > 2]


def test_summary_json_and_headline_carry_the_searched_answer(tmp_path: Path) -> None:
    folder, record = _search_run(tmp_path)
    assert record.status == "found" and record.answer_rps is not None
    devices = len(read_manifest(folder).serving_devices.indices) or 1
    report = html.unescape(build_report(folder).read_text(encoding="utf-8"))
    search = json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))["search"]
    assert search["status"] == "found" and search["answer_rps"] == record.answer_rps
    assert search["per_device_rps"] == record.answer_rps / devices
    assert search["p99_ms"] == record.answer_p99_ms and search["slo"]["p99_ms"] == SLO_MS
    assert search["p99_upper_ms"] == record.answer_p99_upper_ms <= SLO_MS and search["outcome"] == "answer"
    low, high = search["bracket"]
    assert low == record.answer_rps and high is not None and low < LIMIT_RPS < high
    headline = report[report.index('id="headline"') :][:800]
    assert f"{record.answer_rps / devices:.1f} req/s per device at P99 <= {SLO_MS:g} ms" in headline
    assert "capacity-search" in report and record.probes[-1].reason in report


def test_a_run_without_a_search_has_no_search_in_its_summary(tmp_path: Path) -> None:
    folder = synthesize(tmp_path / "run", n_requests=500, n_devices=1, hours=0.02)
    build_report(folder)
    assert json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))["search"] is None


def test_zh_search_report_has_no_untranslated_heading(tmp_path: Path) -> None:
    folder, record = _search_run(tmp_path)
    zh = build_report(folder, lang="zh").read_text(encoding="utf-8")
    block = zh[
        zh.index('<section id="capacity-search">') : zh.index("</section>", zh.index("capacity-search"))
    ]
    assert CATALOGUE["search_title"][1] in block and CATALOGUE["search_title"][0] not in block
    for probe in record.probes:
        assert probe.reason not in html.unescape(block)  # the English reason is rendered in Chinese
    assert "每设备" in zh[zh.index('id="headline"') :][:800]
    untranslated = {h: _english_words(h) for h in _headings(zh) if _english_words(h)}
    assert untranslated == {}


def test_zh_length_and_quality_blocks_have_no_untranslated_heading() -> None:
    lengths = [LengthBin(lo_tokens=1, hi_tokens=32, n=10, p50_ms=3.0, p99_ms=5.0)]
    quality = QualityGate(
        min_cosine=0.99,
        steps=[QualityStep(label="u6", n_probes=4, cosine_mean=0.5, cosine_min=0.1, below_gate=True)],
    )
    for template, context in (
        ("_lengths.html.j2", {"lengths": lengths}),
        ("_quality_probes.html.j2", {"quality": quality}),
    ):
        zh = render(template, "zh", **context)
        en = render(template, "en", **context)
        assert _headings(zh) and {h: _english_words(h) for h in _headings(zh) if _english_words(h)} == {}
        assert _headings(en) != _headings(zh)
    assert "以下阶梯的向量质量低于门限：u6" in render("_quality_probes.html.j2", "zh", quality=quality)


def _verdict_cell(report: str) -> str:
    cell = re.search(r'<td id="search-verdict" class="(\w+)">(.*?)</td>', report, re.S)
    assert cell is not None, "the headline has no search verdict"
    return f"{cell.group(1)}: {html.unescape(cell.group(2))}"


def test_the_verdict_line_agrees_with_the_headline(tmp_path: Path) -> None:
    # A search probes past the limit on purpose, so its steps always "meet the SLO at some steps only";
    # the headline's verdict must say what the answer says instead.
    folder, record = _search_run(tmp_path / "a")
    report = build_report(folder).read_text(encoding="utf-8")
    headline = report[
        report.index('id="headline"') : report.index("</section>", report.index('id="headline"'))
    ]
    assert _verdict_cell(headline).startswith(f"pass: met with confidence up to {record.answer_rps:g} req/s")
    assert "met at some steps only" not in headline

    folder, record = _search_run(tmp_path / "b", limit_rps=1.0)  # below the floor: no rate meets the SLO
    assert record.status == "below_min_rate" and record.answer_rps is None
    for lang, none_text, some_steps in (
        ("en", "not met at any probed rate", CATALOGUE["verdict_partial"][0]),
        ("zh", CATALOGUE["search_verdict_none"][1].split("（")[0], CATALOGUE["verdict_partial"][1]),
    ):
        report = build_report(folder, lang=lang).read_text(encoding="utf-8")
        headline = report[
            report.index('id="headline"') : report.index("</section>", report.index('id="headline"'))
        ]
        no_answer = CATALOGUE["search_no_answer"][0 if lang == "en" else 1].split("{")[0]
        assert no_answer in html.unescape(headline)
        cell = _verdict_cell(headline)
        assert cell.startswith(f"warn: {none_text}") and some_steps not in headline, cell
    note = html.unescape(report)
    assert "最低速率" in note  # the reason (the floor) is rendered in the report's language


def test_the_search_figure_draws_every_probe_interval_the_slo_and_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = search_record()
    drawn: list[Figure] = []
    monkeypatch.setattr(figures, "to_data_uri", lambda fig: drawn.append(fig) or "data:")
    search_section.search_figure(record, "en")
    (ax,) = drawn[0].axes
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    points = sorted(float(x) for c in bars for x in c.lines[0].get_xdata())
    assert points == sorted(p.rate for p in record.probes if p.p99_ms is not None)
    assert all(c.has_yerr for c in bars)
    flat = [line for line in ax.lines if len(set(line.get_ydata())) == 1 and len(set(line.get_xdata())) > 1]
    assert any(line.get_ydata()[0] == SLO_MS for line in flat)  # the SLO
    upright = [line for line in ax.lines if len(set(line.get_xdata())) == 1 and len(line.get_xdata()) == 2]
    assert any(line.get_xdata()[0] == record.answer_rps for line in upright)  # the answer

"""The run report: self-contained (no external URL), escaped, localised, and built from the folder alone."""

from __future__ import annotations

import json
import re

import pytest

from reports.build import build_report
from reports.i18n import CATALOGUE
from tests.golden.builders import SCRIPT_ERROR
from tests.golden.fixtures import golden_copy

EXTERNAL = re.compile(
    r"https?://|//cdn|\bsrc\s*=\s*[\"'](?!data:)|\bhref\s*=\s*[\"'](?!#)|@import|url\(", re.I
)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = {}
    for lang in ("en", "zh"):
        folder = golden_copy("known_percentiles", tmp_path_factory.mktemp(lang))
        path = build_report(folder, lang=lang)
        assert path == (folder.report if lang == "en" else folder.root / "report.zh.html")
        assert (folder.analysis / "summary.json").is_file()
        out[lang] = path.read_text(encoding="utf-8")
    return out


def test_no_external_urls(reports) -> None:
    for html in reports.values():
        # The manifest's target URL is shown as escaped text, never as a link or resource.
        stripped = html.replace("http://127.0.0.1:8086/v1/embeddings", "")
        assert EXTERNAL.findall(stripped) == []
        assert "data:image/png;base64," in html


def test_server_error_text_is_escaped(reports) -> None:
    html = reports["en"]
    assert SCRIPT_ERROR not in html
    assert "&lt;script&gt;alert(" in html
    assert html.count("<script>") == 1  # only the report's own render check


def test_chinese_labels(reports) -> None:
    zh, en = reports["zh"], reports["en"]
    for key in ("report_title", "steps", "decomposition", "capacity", "health", "quality"):
        assert CATALOGUE[key][1] in zh
        assert CATALOGUE[key][0] in en
        assert CATALOGUE[key][0] not in zh
    assert 'lang="zh-CN"' in zh


def test_report_states_method_host_sharing_and_findings(reports) -> None:
    html = reports["en"]
    assert "method &#39;linear&#39;" in html or "method 'linear'" in html
    assert "shares this host with the service (generator CPU mean 30.0%)" in html
    assert "not universal" in html
    assert "fall outside every recorded stage" in html  # the 4 dropped rows


def test_every_catalogue_entry_has_both_languages() -> None:
    for key, (en, zh) in CATALOGUE.items():
        assert en and zh, key


def test_summary_json_round_trips(tmp_path) -> None:
    folder = golden_copy("known_percentiles", tmp_path)
    build_report(folder, slo_p99_ms=500.0)
    summary = json.loads((folder.analysis / "summary.json").read_text())
    assert summary["slo_p99_ms"] == 500.0
    assert summary["slo_verdict"] == "fail"
    assert summary["steps"][0]["stats"]["latency"]["p99_ms"] == pytest.approx(990.01)


def test_the_step_table_comes_before_run_details_and_numbers_read_one_way(reports) -> None:
    """A planner sees the answer and the per-step table first; run details and the config dump follow."""
    html = reports["en"]
    assert html.index('id="headline"') < html.index('id="steps-table"') < html.index('id="run-details"')
    assert re.search(r'<details id="service-config"><summary>show</summary>', html)
    table = html[html.index('id="steps-table"') : html.index("</table>", html.index('id="steps-table"'))]
    cells = re.findall(r"<td[^>]*>(?:<b>)?([0-9][0-9,.]*)(?:</b>)?</td>", table)
    assert cells and all(not re.fullmatch(r"\d{4,}(\.\d+)?", c) for c in cells), cells  # 1,468, never 1468

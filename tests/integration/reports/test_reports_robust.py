"""Reports on the runs a user most needs to diagnose: nothing succeeded, the generator was killed, nothing ran.

Every folder is written through the run-folder writers (tests.golden.builders), as a run would leave it.
"""

from __future__ import annotations

import re

import pytest

from embedperf.cli import main as embedperf
from embedperf.schema import StageRecord
from reports.build import build_report
from reports.i18n import CATALOGUE
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, stepped_run, write_run
from tests.golden.fixtures import golden_copy

TAG = re.compile(r"<[^>]+>")


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", TAG.sub(" ", html))


def test_dead_target_run_reports_its_failure(tmp_path) -> None:
    folder = stepped_run(tmp_path / "dead", [1, 5], 8.0, qps_per_user=50.0, refused=True)
    for lang in ("en", "zh"):
        html = build_report(folder, lang=lang).read_text(encoding="utf-8")
        assert 'id="headline"' in html
        assert CATALOGUE["bn_no_data"][lang == "zh"] in html
    text = _text(folder.report.read_text(encoding="utf-8"))
    assert "No step meets P99 ≤ 995 ms within the error budget" in text
    assert "100.000%" in text  # error rate, always as a percentage
    assert "0 successful of" in text


def test_killed_generator_folder_yields_an_incomplete_report(tmp_path) -> None:
    """SIGKILL mid-run: manifest complete = false, the last stage never ended, a handful of rows."""
    stages = [
        StageRecord(
            index=0, label="users=1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + 5, warmup_s=1
        ),
        StageRecord(
            index=1, label="users=10", users=10, start_unix_s=T0_UNIX_S + 5, end_unix_s=None, warmup_s=1
        ),
    ]
    rows = [ok_row(0, T0_UNIX_S + 1.5 + 0.2 * i, 12.0, users=1) for i in range(15)]
    planned = scenario_for_stages([s.model_copy(update={"end_unix_s": s.start_unix_s + 5}) for s in stages])
    folder = write_run(
        tmp_path / "killed", rows, [], stages, scenario=planned, complete=False, end_unix_s=None
    )
    html = build_report(folder).read_text(encoding="utf-8")
    assert 'id="incomplete-banner"' in html
    assert CATALOGUE["incomplete_banner"][0] in html
    zh = build_report(folder, lang="zh").read_text(encoding="utf-8")
    assert CATALOGUE["incomplete_banner"][1] in zh


def test_run_with_no_request_row_at_all(tmp_path, capsys) -> None:
    stage = StageRecord(
        index=0, label="users=1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=None, warmup_s=1
    )
    planned = scenario_for_stages([stage.model_copy(update={"end_unix_s": T0_UNIX_S + 5})])
    folder = write_run(tmp_path / "empty", [], [], [stage], scenario=planned, complete=False, end_unix_s=None)
    assert embedperf(["report", str(folder.root)]) == 0
    assert capsys.readouterr().out.strip() == str(folder.report)
    html = folder.report.read_text(encoding="utf-8")
    assert 'id="incomplete-banner"' in html and CATALOGUE["bn_no_data"][0] in html


def test_compare_tolerates_a_dead_candidate(tmp_path) -> None:
    base = stepped_run(tmp_path / "base", [1, 5], 12.0, seed=1)
    dead = stepped_run(tmp_path / "dead", [1, 5], 12.0, qps_per_user=50.0, refused=True)
    out = tmp_path / "cmp.html"
    assert embedperf(["compare", str(base.root), str(dead.root), "--gate", "qps:-3%", "--out", str(out)]) == 1
    text = _text(out.read_text(encoding="utf-8"))
    assert "FAIL" in text and "whatever its speed" in text


@pytest.fixture(scope="module")
def golden_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("golden")
    base = golden_copy("compare_base", root)
    known = golden_copy("known_percentiles", root)
    return {
        "headline": build_report(base, slo_p99_ms=300.0).read_text(encoding="utf-8"),
        "en": build_report(known).read_text(encoding="utf-8"),
        "zh": build_report(known, lang="zh").read_text(encoding="utf-8"),
        "zh_base": build_report(base, lang="zh", slo_p99_ms=300.0).read_text(encoding="utf-8"),
    }


def test_headline_states_the_capacity_answer(golden_reports) -> None:
    text = _text(golden_reports["headline"])
    head = text[text.index(CATALOGUE["headline"][0]) :][:600]
    assert re.search(r"[\d,.]+ req/s at P99 ≤ 300 ms on 2 device\(s\)", head), head
    assert CATALOGUE["serving_devices"][0] in head and CATALOGUE["generator_bottleneck"][0] in head


def test_energy_per_1000_embeddings_from_measured_power(golden_reports) -> None:
    text = _text(golden_reports["en"])
    assert CATALOGUE["j_per_1k"][0] in text
    # 2 devices x 100 W, 1,000 single-input ok requests in 100 s of steady state: 20 J each.
    energy = text[text.index(CATALOGUE["energy"][0]) :][:400]
    assert "users=10 200.0 10.0 20,000.0" in energy, energy


def test_zh_report_translates_labels_reasons_and_kinds(golden_reports) -> None:
    zh = _text(golden_reports["zh"]) + _text(golden_reports["zh_base"])
    for key in ("headline", "bottlenecks", "sources", "kind_closed_loop", "goodput", "legend", "energy"):
        assert CATALOGUE[key][1] in zh, key
    for english in ("closed_loop", "Goodput", "Bottleneck", "Telemetry sources", "consistent", "skipped"):
        assert english not in zh, english


def test_legends_units_and_thresholds_match_their_labels(golden_reports) -> None:
    en = golden_reports["en"]
    assert "Error rate &lt; 0.100%" in en  # health label in % like every other error rate
    assert "Mismatch (tolerance 10%)" in en or CATALOGUE["little"][0] not in en
    assert "p99_ms" not in _text(en) and "device_util_pct" not in _text(en)
    assert "⚠" not in en or CATALOGUE["legend"][0] in en


def test_devices_for_the_scenarios_target_qps_are_computed_in_the_report(tmp_path) -> None:
    slo = {"p99_ms": 100.0, "error_budget_pct": 1.0, "target_qps": 1000.0}
    folder = stepped_run(tmp_path / "plan", [1, 5, 10], 12.0, slo=slo)
    text = _text(build_report(folder).read_text(encoding="utf-8"))
    # ~100 req/s meet the SLO at users=10 on 1 device; 75 usable with 25% headroom -> 14 replicas. Every
    # step met the SLO (no knee): the capacity is a lower bound, so the device count is "at most".
    assert re.search(
        r"For 1,000 QPS with 25% headroom: at most 1[34] replica\(s\) of this configuration", text
    ), text[:800]
    assert "embedperf capacity RUN" not in text

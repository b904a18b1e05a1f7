"""Long runs: the report draws the per-minute series and states the soak findings, flagged where they fire."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from analysis.cli.synth import synthesize
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.schema import RunFolder, StageRecord
from reports.build import build_report, render_run_report
from reports.i18n import CATALOGUE
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, stepped_run, write_run

SOAK_S = 720  # 12 minutes: past analysis.figures.soak.SOAK_MIN_DURATION_S, so the run gets per-minute series
ROWS_PER_S = 3
LATENCY_CYCLE = 18  # latencies 10..27 ms in turn: every minute holds the same ten cycles, so P99 is flat
DEVICES = ("npu0.chip0", "npu1.chip0")
LANG = {"en": 0, "zh": 1}


def soak_run(root: Path, throttle: bool) -> RunFolder:
    """One soak stage at 3 requests a second with telemetry from two NPUs and the service.

    throttle=True: over the run the devices heat by 20 °C while their clock falls by 20 %, and the
    service's memory grows by 200 MB/h; otherwise every telemetry value is constant.
    """
    stage = StageRecord(
        index=0, label="soak", users=4, start_unix_s=T0_UNIX_S, end_unix_s=T0_UNIX_S + SOAK_S, warmup_s=0.0
    )
    rows = [
        ok_row(0, T0_UNIX_S + k / ROWS_PER_S, 10.0 + k % LATENCY_CYCLE, users=4)
        for k in range(SOAK_S * ROWS_PER_S)
    ]
    telemetry = []
    for s in range(SOAK_S):
        ts, heat = T0_UNIX_S + s, (s / SOAK_S if throttle else 0.0)
        for device in DEVICES:
            telemetry += [
                (ts, "npu_smi", device, "device_util_pct", 80.0),
                (ts, "npu_smi", device, "temp_c", 55.0 + 20.0 * heat),
                (ts, "npu_smi", device, "clock_mhz", 1800.0 * (1.0 - 0.2 * heat)),
                (ts, "npu_smi", device, "power_w", 200.0),
            ]
        rss_mb = 1000.0 + (200.0 * s / 3600.0 if throttle else 0.0)
        telemetry.append((ts, "psutil", "proc:service", "rss_mb", rss_mb))
    scenario = scenario_for_stages([stage], name="soak", kind="soak")
    return write_run(root, rows, telemetry, [stage], scenario=scenario)


def findings_table(html: str) -> str | None:
    found = re.search(r'<table class="kv" id="soak-minutes">.*?</table>', html, re.S)
    return found.group(0) if found else None


def finding_cell(table: str, key: str, lang: str) -> tuple[str, str]:
    """(class, text) of the value cell in the findings row labelled by key."""
    label = re.escape(CATALOGUE[key][LANG[lang]])
    found = re.search(rf'<tr><td>{label}</td><td class="([^"]*)">(.*?)</td></tr>', table, re.S)
    assert found is not None, key
    return found.group(1), found.group(2)


def figure_tag(lang: str) -> str:
    return f'<img alt="{CATALOGUE["fig_soak"][LANG[lang]]}" src="data:image/png;base64,'


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = soak_run(tmp_path_factory.mktemp("steady"), throttle=False)
    return {lang: build_report(folder, lang=lang).read_text(encoding="utf-8") for lang in LANG}


@pytest.fixture(scope="module")
def throttled(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = soak_run(tmp_path_factory.mktemp("throttled"), throttle=True)
    return build_report(folder).read_text(encoding="utf-8")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_soak_report_has_the_per_minute_figure_and_findings(steady: dict[str, str], lang: str) -> None:
    html = steady[lang]
    assert figure_tag(lang) in html
    table = findings_table(html)
    assert table is not None
    assert CATALOGUE["soak_minutes"][LANG[lang]] in html
    for key in ("soak_p99_slope", "soak_rss", "soak_throttling"):
        cls, text = finding_cell(table, key, lang)
        assert cls == "" and text
    assert "warn" not in table
    _, throttling = finding_cell(table, "soak_throttling", lang)
    assert throttling.startswith(CATALOGUE["no"][LANG[lang]] + " · ")
    assert "+0.0 °C" in throttling and throttling.count("+0.0%") == 2  # flat temperature, clock and power
    if lang == "zh":
        english = [CATALOGUE[k][0] for k in ("soak_minutes", "soak_throttling", "fig_soak")]
        assert [text for text in english if text in html] == []


def test_throttling_and_memory_growth_are_flagged(throttled: str) -> None:
    table = findings_table(throttled)
    assert table is not None and figure_tag("en") in throttled
    cls, text = finding_cell(table, "soak_throttling", "en")
    assert cls == "warn" and text.startswith("yes · ")
    temp, clock, power = re.findall(r"([+-]\d+\.\d)", text)
    assert float(temp) >= 5.0 and float(clock) <= -5.0 and float(power) == 0.0
    assert finding_cell(table, "soak_rss", "en")[0] == "warn"
    assert finding_cell(table, "soak_p99_slope", "en")[0] == ""  # the latencies stay the same


def test_a_short_run_has_neither_figure_nor_findings(tmp_path: Path) -> None:
    html = build_report(stepped_run(tmp_path / "short", [2, 4], 40.0)).read_text(encoding="utf-8")
    assert findings_table(html) is None
    assert CATALOGUE["fig_soak"][0] not in html and CATALOGUE["soak"][0] not in html


def test_a_long_stepped_run_gets_the_per_minute_section_without_the_soak_trends(tmp_path: Path) -> None:
    """Four steps over 12 minutes: not a soak scenario, but long enough for per-minute series."""
    folder = synthesize(tmp_path / "long", n_requests=2000, n_devices=1, hours=SOAK_S / 3600.0)
    html = build_report(folder).read_text(encoding="utf-8")
    assert findings_table(html) is not None and figure_tag("en") in html
    assert CATALOGUE["soak_p50_slope"][0] not in html  # analysis.figures.soak's table is for soak runs alone


@pytest.fixture(scope="module")
def steady_analysis(tmp_path_factory: pytest.TempPathFactory) -> RunAnalysis:
    return analyse_folder(soak_run(tmp_path_factory.mktemp("analysed"), throttle=False))


def test_report_renders_with_findings_but_no_minutes_and_the_reverse(steady_analysis: RunAnalysis) -> None:
    analysis = steady_analysis
    assert analysis.figures.minutes and analysis.summary.soak_minutes is not None
    no_minutes = replace(analysis, figures=analysis.figures.model_copy(update={"minutes": []}))
    html = render_run_report(no_minutes, "en")
    assert findings_table(html) is not None and CATALOGUE["fig_soak"][0] not in html
    no_findings = replace(analysis, summary=analysis.summary.model_copy(update={"soak_minutes": None}))
    html = render_run_report(no_findings, "en")
    assert findings_table(html) is None and figure_tag("en") in html


def test_findings_without_device_telemetry_say_not_measured(steady_analysis: RunAnalysis) -> None:
    analysis = steady_analysis
    assert analysis.summary.soak_minutes is not None
    bare = analysis.summary.soak_minutes.model_copy(
        update={"temp_rise_c": None, "clock_change_pct": None, "power_change_pct": None}
    )
    summary = analysis.summary.model_copy(update={"soak_minutes": bare})
    table = findings_table(render_run_report(replace(analysis, summary=summary), "en"))
    assert table is not None
    assert finding_cell(table, "soak_throttling", "en") == ("na", CATALOGUE["soak_no_telemetry"][0])


def test_the_findings_note_states_the_thresholds(steady: dict[str, str]) -> None:
    note = re.search(r'id="soak-minutes">.*?</table>\s*<p class="note">(.*?)</p>', steady["en"], re.S)
    assert note is not None
    assert "more than 10% of its median per hour" in note.group(1)
    assert "at least 5 °C hotter" in note.group(1) and "at least 5% lower" in note.group(1)

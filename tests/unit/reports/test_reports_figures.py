"""Figures: Chinese labels only with a CJK font, otherwise English without warnings."""

from __future__ import annotations

import warnings

from analysis.engine.minute_series import MinutePoint
from reports import figures
from reports.figures import figure_lang


def test_english_fallback_without_cjk_font(monkeypatch) -> None:
    monkeypatch.setattr(figures, "cjk_font", lambda: None)
    assert figure_lang("zh") == "en"
    assert figure_lang("en") == "en"


def test_cjk_font_is_used_when_present(monkeypatch) -> None:
    monkeypatch.setattr(figures, "cjk_font", lambda: "WenQuanYi Zen Hei")
    assert figure_lang("zh") == "zh"


def test_zh_figures_render_without_warnings(tmp_path) -> None:
    from analysis.run.analyse import analyse_folder
    from tests.golden.fixtures import golden_copy

    analysis = analyse_folder(golden_copy("compare_base", tmp_path), n_boot=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = figures.run_figures(analysis, "zh")
    assert {"percentiles", "throughput", "timeseries", "cdf", "batch", "decomposition"} <= set(out)
    assert all(uri.startswith("data:image/png;base64,") for uri in out.values())


def _point(minute: int, **telemetry: float) -> MinutePoint:
    return MinutePoint(
        minute=minute, qps=4.0, goodput_qps=3.0, error_rate=0.25, p50_ms=10.0, p99_ms=30.0, **telemetry
    )


def _columns(panels: list[figures.MinutePanel]) -> list[list[str]]:
    return [[column for column, _ in panel.lines] for panel in panels]


def test_minute_panels_leave_out_what_no_source_reported() -> None:
    bare = figures.minute_frame([_point(m) for m in range(12)])
    assert _columns(figures.minute_panels(bare, "en")) == [
        ["goodput_qps", "qps"],
        ["p50_ms", "p99_ms"],
        ["error_pct"],
    ]
    assert bare["error_pct"].tolist() == [25.0] * 12
    measured = figures.minute_frame(
        [_point(m, temp_max_c=60.0, service_rss_mb=900.0) for m in range(6)]
        + [_point(m, device_util_pct=70.0, temp_max_c=61.0, clock_mhz=1800.0) for m in range(6, 12)]
    )
    panels = figures.minute_panels(measured, "en")
    assert _columns(panels)[3:] == [["device_util_pct"], ["temp_max_c", "clock_mhz"], ["service_rss_mb"]]
    assert [p.ylabel is None for p in panels] == [False, False, False, False, True, False]


def test_minute_panels_drop_latency_when_no_request_succeeded() -> None:
    failed = [p.model_copy(update={"p50_ms": None, "p99_ms": None}) for p in map(_point, range(12))]
    assert ["p50_ms", "p99_ms"] not in _columns(figures.minute_panels(figures.minute_frame(failed), "en"))


def test_minute_frame_keeps_a_minute_without_requests_as_a_gap() -> None:
    frame = figures.minute_frame([_point(m) for m in (3, 4, 7)])
    assert frame.index.tolist() == [3, 4, 5, 6, 7]
    assert frame.loc[[5, 6], "goodput_qps"].isna().all() and frame.loc[7, "goodput_qps"] == 3.0

"""Figures: Chinese labels only with a CJK font, otherwise English without warnings."""

from __future__ import annotations

import warnings

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
    from analysis.summary import analyse_folder
    from tests.golden.fixtures import golden_copy

    analysis = analyse_folder(golden_copy("compare_base", tmp_path), n_boot=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = figures.run_figures(analysis, "zh")
    assert {"percentiles", "throughput", "timeseries", "cdf", "batch", "decomposition"} <= set(out)
    assert all(uri.startswith("data:image/png;base64,") for uri in out.values())

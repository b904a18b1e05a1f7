"""Every figure is laid out in fixed margins (reports.figures.Margins), not measured: this checks that no
title, axis label or tick label falls off the canvas or onto a neighbouring panel, in both languages, with
wide tick labels (six digits) and the most y axes a panel has."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from analysis.engine.minute_series import MinutePoint
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from reports import compare_build, figures, search_section
from tests.golden.builders import search_record
from tests.golden.fixtures import golden_copy

TOLERANCE_PX = 1.0
MODULES = (figures, compare_build)  # search_section's figure is encoded by figures.finish


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> RunAnalysis:
    return analyse_folder(golden_copy("compare_base", tmp_path_factory.mktemp("golden")), n_boot=50)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Per figure the builders draw: its overflows, checked where it would be encoded (inside the
    figures' style, whose fonts its labels are measured in)."""
    kept: list[list[str]] = []

    def keep(fig: Figure) -> str:
        kept.append(overflows(fig))
        return "data:image/png;base64,"

    for module in MODULES:
        monkeypatch.setattr(module, "to_data_uri", keep)
    yield kept


def wide_minutes() -> list[MinutePoint]:
    """A soak's minutes with six-digit values and every per-minute source (three y axes in one panel)."""
    return [
        MinutePoint(
            minute=m,
            qps=123456.0 + m,
            goodput_qps=120000.0,
            error_rate=0.5,
            p50_ms=99999.0,
            p99_ms=123456.0,
            device_util_pct=99.5,
            temp_max_c=85.0,
            power_w=350.5 + m,
            clock_mhz=123456.0,
            service_rss_mb=654321.0,
        )  # fmt: skip
        for m in range(30)
    ]


def overflows(fig: Figure) -> list[str]:
    """What falls off the canvas, and panels whose labels run into each other's (a panel's own extra y axes
    share its place and may)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    canvas = fig.bbox.padded(TOLERANCE_PX)
    boxes: list[tuple[Any, Bbox]] = [
        (ax.get_position().bounds, ax.get_tightbbox(renderer)) for ax in fig.axes
    ]
    found = []
    for position, box in boxes:
        if not (canvas.contains(box.x0, box.y0) and canvas.contains(box.x1, box.y1)):
            found.append(f"panel at {position}: {box} outside the canvas {fig.bbox}")
    for i, (position, box) in enumerate(boxes):
        for other_position, other in boxes[i + 1 :]:
            if position != other_position and box.shrunk(0.999, 0.999).overlaps(other.shrunk(0.999, 0.999)):
                found.append(f"panels at {position} and {other_position} overlap: {box} and {other}")
    return found


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_run_report_figures_fit(analysis: RunAnalysis, drawn: list[list[str]], lang: str) -> None:
    wide = dataclasses.replace(
        analysis, figures=analysis.figures.model_copy(update={"minutes": wide_minutes()})
    )
    out = figures.run_figures(wide, lang)
    assert {"percentiles", "throughput", "timeseries", "cdf", "batch", "decomposition", "soak"} <= set(out)
    assert len(drawn) == len(out)
    assert [problem for problems in drawn for problem in problems] == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_comparison_and_search_figures_fit(analysis: RunAnalysis, drawn: list[list[str]], lang: str) -> None:
    compare_build.load_curves([analysis, analysis], lang)
    search_section.search_figure(search_record(), figures.figure_lang(lang))
    assert len(drawn) == 2
    assert [problem for problems in drawn for problem in problems] == []


def test_the_check_sees_a_label_off_the_canvas() -> None:
    fig, ax = figures.new_figure((6.5, 3.6), margins=figures.Margins(left_in=0.05))
    ax.plot([0, 1], [0, 123456])
    ax.set_ylabel("latency (ms)")
    assert any("outside the canvas" in problem for problem in overflows(fig))


def test_stacked_panels_must_share_their_x_axis() -> None:
    with pytest.raises(ValueError, match="share their x axis"):
        figures.new_figure((6.5, 3.6), 2, 1)


def test_a_figure_is_one_draw(analysis: RunAnalysis, monkeypatch: pytest.MonkeyPatch) -> None:
    """No layout engine: savefig draws a figure once (tight layout drew it twice)."""
    draws = []
    original = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(self) or original(self, renderer))
    with figures.style("en"):
        uri = figures.percentiles_vs_load(analysis.summary, "en")
    assert uri.startswith("data:image/png;base64,") and len(draws) == 1

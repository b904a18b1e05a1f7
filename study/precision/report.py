"""The precision report: one self-contained HTML page per check, rebuilt from the result JSON alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reports.build import check_lang, write_html
from reports.figures import figure_lang, new_figure, style, to_data_uri
from reports.i18n import t
from reports.render import render
from study.precision.compare import LayerAgreement, LayerReport, PrecisionResult

# A Linear's role inside its layer: the name after the layer index (attention.self.query, output.dense).
LINEAR_ROLE_SEPARATOR = "."


def layers_figure(report: LayerReport, lang: str) -> str:
    """Token cosine (mean, P5, min) of each layer's output by depth; Linears by role in a second panel."""
    panels = 2 if report.linears else 1
    with style(lang):
        fig, axes = new_figure((6.2 * panels, 3.6), 1, panels, squeeze=False)
        ax = axes[0][0]
        depth = np.array([p.depth for p in report.layers])
        ax.plot(depth, [p.cosine_mean for p in report.layers], marker="o", label=t("pr_fig_mean", lang))
        ax.plot(depth, [p.cosine_p5 for p in report.layers], marker=".", ls="--", label="P5")
        ax.plot(depth, [p.cosine_min for p in report.layers], marker="x", ls=":", label=t("pr_min", lang))
        ax.axhline(report.gate, color="k", ls="--", lw=1, label=t("pr_fig_gate", lang, gate=report.gate))
        first = next((p for p in report.layers if p.name == report.first_below_gate), None)
        if first is not None:
            ax.plot([first.depth], [first.cosine_mean], marker="*", markersize=15, color="C3", ls="")
        ax.set_ylabel(t("pr_fig_cosine", lang))
        if report.linears:
            ax2 = axes[0][1]
            names = {p.depth: p.name for p in report.layers}
            roles: dict[str, list[LayerAgreement]] = {}
            for linear in report.linears:
                role = linear.name[len(names[linear.depth]) + len(LINEAR_ROLE_SEPARATOR) :]
                roles.setdefault(role, []).append(linear)
            for role, points in roles.items():
                ax2.plot([p.depth for p in points], [p.cosine_mean for p in points], marker="o", label=role)
            ax2.axhline(report.gate, color="k", ls="--", lw=1)
        for panel, title, fontsize in zip(axes[0], ("fig_pr_layers", "fig_pr_linears"), (8, 7), strict=False):
            panel.set_xticks(depth)
            panel.set_xlabel(t("pr_fig_depth", lang))
            panel.set_title(t(title, lang))
            panel.grid(alpha=0.3)
            panel.legend(fontsize=fontsize)
    return to_data_uri(fig)


def write_precision_report(result: PrecisionResult, path: Path, lang: str = "en") -> Path:
    check_lang(lang)
    figures = {}
    if result.layers is not None and result.layers.layers:
        figures["layers"] = layers_figure(result.layers, figure_lang(lang))
    return write_html(path, render("precision.html.j2", lang, r=result, figures=figures))

"""`embedperf precision`'s terminal output: the verdict first, then domains, layers and the int8 advice."""

from __future__ import annotations

import shlex

from study.precision.advice_plan import Advice, VariantCheck
from study.precision.compare import LayerAgreement, LayerReport, PrecisionResult

WORST_SHOWN = 5


def format_result(result: PrecisionResult) -> str:
    verdict = "PASS" if result.passed else "FAIL"
    gates, r = result.gates, result.retrieval
    against = f"each of {r.n_queries} texts vs the others"
    if r.mode == "queries_to_documents":
        against = f"{r.n_queries} queries vs {r.n_documents} documents"
    lines = [
        f"candidate : {result.candidate}",
        f"reference : {result.reference} ({result.n_texts} texts, {result.dataset})",
        f"cosine    : mean {result.cosine_mean:.6f}  P5 {result.cosine_p5:.6f}  P1 {result.cosine_p1:.6f}  "
        f"min {result.cosine_min:.6f}",
        f"retrieval : agreement@{r.k} mean {r.agreement_mean:.3f} min {r.agreement_min:.2f}  "
        f"rank correlation mean {r.rank_correlation_mean:.4f} min {r.rank_correlation_min:.4f} ({against})",
    ]
    for axis in dict.fromkeys(d.axis for d in result.domains):
        cells = [
            f"{d.name} {d.cosine_mean:.5f}/{d.cosine_p5:.5f}{'' if d.passed else ' FAIL'}"
            for d in result.domains
            if d.axis == axis
        ]
        lines.append(f"{'by ' + axis:<10}: " + "  ".join(cells) + "   (mean/P5)")
    for domain in result.failing_domains:
        worst = ", ".join(f"{w.id} {w.cosine:.4f}" for w in domain.worst)
        lines.append(
            f"  {domain.label} fails (mean {domain.cosine_mean:.5f}, P5 {domain.cosine_p5:.5f}): worst {worst}"
        )
    lines.append("worst     : " + ", ".join(f"{w.id} {w.cosine:.4f}" for w in result.worst[:WORST_SHOWN]))
    lines.append(
        f"gate      : mean cosine >= {gates.min_mean_cosine}, every domain's mean and P5 >= "
        f"{gates.min_domain_cosine}, agreement@{r.k} >= {gates.min_topk_agreement} ({gates.profile}) "
        f"-> {verdict}"
    )
    lines += [f"  {failure}" for failure in result.failures]
    return "\n".join(lines)


def _layer_line(p: LayerAgreement) -> str:
    return (
        f"  {p.name:<44} cos mean {p.cosine_mean:.5f} P5 {p.cosine_p5:.5f} min {p.cosine_min:.5f}  "
        f"rel.err mean {p.rel_error_mean:.4f} P95 {p.rel_error_p95:.4f}  drop {p.drop:+.5f}"
    )


def format_layers(report: LayerReport) -> str:
    lines = [
        f"layers    : hidden states against fp32 on {report.n_texts} texts, token by token (padding masked)"
    ]
    for layer in report.layers:
        lines += [_layer_line(p) for p in report.linears if p.depth == layer.depth]
        lines.append(_layer_line(layer) + ("  < gate" if layer.cosine_mean < report.gate else ""))
    first = report.first_below_gate
    below = f"first layer below {report.gate}: {first}"
    lines.append(below if first else f"no layer's mean cosine is below {report.gate}")
    lines.append(f"largest drop: {report.largest_drop}")
    if report.largest_drop_linear:
        lines.append(f"largest drop of a Linear: {report.largest_drop_linear}")
    return "\n".join(lines)


def _check_line(check: VariantCheck) -> str:
    outcome = "passes" if check.passed else "fails: " + "; ".join(check.failures)
    return (
        f"cosine {check.cosine_mean:.6f}, agreement@{check.topk} {check.topk_agreement_mean:.3f}, "
        f"{check.kept_fp32} kept in fp32 -> {outcome}"
    )


def format_advice(advice: Advice, check_args: str = "") -> str:
    """The advice; check_args are the options (model, dataset, gates) the verification command repeats."""
    top = ", ".join(f"{s.name} {s.cosine_drop:.5f}" for s in advice.sensitivities[:5])
    lines = [
        f"advice    : each of {advice.n_linear} Linear layers alone in int8 on {advice.probe_texts} of "
        f"{advice.n_texts} texts; most sensitive: {top}"
    ]
    if advice.expression is None or advice.verified is None:
        lines.append("no int8 variant passes the gate: keep this model in fp32 (or use bf16)")
        if advice.one_fewer is not None:
            lines.append(f"  best int8 variant tried: {_check_line(advice.one_fewer)}")
        return "\n".join(lines)
    lines += [
        f"keep in fp32: {len(advice.kept_fp32)} of {advice.n_linear} Linear layers "
        f"(attention-only, --int8-exclude {shlex.quote(advice.attention_only_expression)}, keeps "
        f"{advice.attention_only_kept})",
        f"--int8-exclude {shlex.quote(advice.expression)}",
        f"advised   : {_check_line(advice.verified)} (loaded as the service loads it)",
    ]
    if advice.one_fewer is not None:
        lines.append(f"one fewer : {_check_line(advice.one_fewer)}")
    if len(advice.kept_fp32) >= advice.attention_only_kept:
        lines.append(
            f"not fewer than attention-only: with {len(advice.kept_fp32) - 1} kept the gate fails (line above)"
        )
    for figure in advice.speed:
        lines.append(
            f"speed     : {figure.variant:<8} {figure.texts_per_s:8.1f} texts/s  x{figure.ratio_to_fp32:.2f} of fp32"
        )
    lines.append(f"            ({advice.speed_method})")
    lines.append(
        f"check it  : embedperf precision --precision int8 --int8-exclude {shlex.quote(advice.expression)}"
        + (f" {check_args}" if check_args else "")
    )
    return "\n".join(lines)

"""The comparison's lines in a report's language: gate reasons, failure lines and change warnings.

The comparison keeps each reason as a code and its numbers (analysis/compare/reasons.py); English is
its own text, other languages come from the catalogue (reports/i18n.py, keys `cr_<code>`).
"""

from __future__ import annotations

from analysis.compare.changes import CandidateComparison
from analysis.compare.gate import BUDGET_RULE_PREFIX, GateResult
from analysis.compare.model import MetricChange
from analysis.compare.reasons import Reason, render_reason
from reports.i18n import t


def _text(why: Reason | None, fallback: str | None, lang: str) -> str:
    """A reason in `lang`; a result or change written without a code keeps its English text."""
    if why is None:
        return fallback or ""
    return render_reason(why, lambda code: t(f"cr_{code}", lang))


def gate_reason(result: GateResult, lang: str) -> str:
    return _text(result.why, result.reason, lang)


def change_warning(change: MetricChange, lang: str) -> str:
    return _text(change.why, change.warning, lang)


def failure_lines(cand: CandidateComparison, lang: str) -> list[str]:
    """analysis.compare.gate.failure_lines in `lang`: the error budget first, one line per metric and step."""
    failed = sorted((r for r in cand.gate if r.failed), key=lambda r: not r.rule.startswith(BUDGET_RULE_PREFIX))
    groups: dict[tuple[str, str], list[GateResult]] = {}
    for r in failed:
        groups.setdefault((r.scope, r.metric), []).append(r)
    line, also = t("cr_line", lang), t("cr_also", lang)
    return [
        line.format(rule=first.rule, scope=first.scope, reason=gate_reason(first, lang))
        + "".join(also.format(rule=r.rule) for r in rest)
        for first, *rest in groups.values()
    ]

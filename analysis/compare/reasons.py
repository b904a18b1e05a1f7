"""Why a comparison says what it says: reason codes with their numbers, and their English text.

A reason is a code and its parameters (`Reason`); a parameter may itself be a reason (a gate line quotes
the change, which may quote why it has no verdict). The English text, kept in the comparison's JSON,
JUnit and console lines, is rendered here; the reports render the same codes in their own language
(reports/i18n.py, keys `cr_<code>`), so a zh report says every line in Chinese.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Reason = dict[str, Any]  # {"code": str, "params": {name: str | float | int | Reason}}

REASONS: dict[str, str] = {
    "short_steady": "{have:.1f} s of steady state < {need:g} needed",
    "few_ok": "{have} ok samples for P{q:g} < {need} needed",
    "few_telemetry": "{have} telemetry seconds < {need} needed",
    "no_requests_in": "no requests in the {sides}",
    "zero_width": "zero-width 95% interval: the data cannot resolve this change",
    "sides_baseline": "baseline",
    "sides_candidate": "candidate",
    "sides_both": "baseline and the candidate",
    "change": "baseline {base}, candidate {cand}, change {change} (95% CI of the difference {low} … {high})",
    "budget_none": "no verdict: the candidate has no requests here",
    "budget_fail": (
        "candidate error rate {rate} ({failed} of {requests} requests failed) > budget {budget}, whatever its speed"
    ),
    "budget_pass": "candidate error rate {rate} ({failed} of {requests} requests failed) <= budget {budget}",
    "rule_empty": "no verdict: no ok requests in the {sides} here; the error budget judges it",
    "rule_unmeasured": "no verdict: {metric} was not measured in both runs",
    "rule_unsupported": "no verdict ({why}): {change}",
    "rule_fail": "{change}, rule {rule}",
    "rule_noise": "{change}: crosses {rule} but the interval includes zero (noise)",
    "rule_pass": "{change}",
}


def reason(code: str, **params: Any) -> Reason:
    return {"code": code, "params": params}


def missing_in(base_n: int, cand_n: int) -> list[str]:
    """The runs ("baseline", "candidate") whose count is zero."""
    return [name for name, n in (("baseline", base_n), ("candidate", cand_n)) if n == 0]


def sides_reason(sides: list[str]) -> Reason:
    """Which runs ("baseline", "candidate") a reason is about, as a reason of its own."""
    return reason("sides_both" if len(sides) == 2 else f"sides_{sides[0]}")


def render_reason(item: Reason, lookup: Callable[[str], str] | None = None) -> str:
    """The reason's text: English from REASONS, or what `lookup(code)` gives (a report's language)."""
    text = lookup(item["code"]) if lookup is not None else REASONS[item["code"]]
    params = {
        k: render_reason(v, lookup) if isinstance(v, dict) and "code" in v else v
        for k, v in item.get("params", {}).items()
    }
    return text.format(**params)

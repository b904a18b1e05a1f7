"""The comparison gate: a small grammar of per-metric thresholds for CI pipelines.

    GATE    := RULE ("," RULE)*
    RULE    := METRIC ":" SIGN NUMBER ["%"]
    SIGN    := "+" (fail when the metric rises by more than NUMBER) | "-" (fails when it falls by more)
    "%"     := NUMBER is relative to the baseline; without it NUMBER is absolute in the metric's unit,
               except error_rate, whose absolute unit is percentage points (error_rate:+0.1 = +0.1 pp).

A rule fails at a step when the point estimate of the change crosses the threshold AND the change's
95% confidence interval excludes zero: noise alone never fails a build.

Every rule is checked at every step the two runs share (steps are matched by load) and nowhere else.
"Overall" is the comparison at the highest load both runs share, itself one of those steps, so it adds
no rule of its own: one regression is one failed result, and one line per metric and step.

The error budget is always a rule, whatever --gate says: every candidate step whose error rate is
above the budget fails, however fast it was; being above the baseline's rate by more than the budget
is covered by it. A step without ok requests (in either run) can never pass: its speed rules have no
verdict and the error budget judges it. The candidate has no verdict, unless some rule failed, when
the loads do not match, when a shared step has no ok requests, or when any rule at any step has no
verdict (too few samples, steps too short).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from analysis.compare.model import StepComparison
from analysis.compare.reasons import Reason, missing_in, reason, render_reason, sides_reason
from embedperf.errors import ConfigError
from embedperf.verdicts import GateVerdict

GateStatus = GateVerdict
ERROR_BUDGET_METRIC = "error_rate"
METRIC_UNITS: dict[str, str] = {
    "qps": "req/s", "p50_ms": "ms", "p95_ms": "ms", "p99_ms": "ms", "error_rate": "%",
    "device_util_pct": "%", "service_cpu_pct": "%", "mem_used_mb": "MB", "unavailable_s": "s",
}  # fmt: skip

GATE_METRICS: dict[str, str] = {
    "qps": "requests per second",
    "p50_ms": "median latency",
    "p95_ms": "95th percentile latency",
    "p99_ms": "99th percentile latency",
    "error_rate": "share of failed requests (absolute unit: percentage points)",
    "unavailable_s": "seconds of the steady window without a successful answer (e.g. unavailable_s:+0)",
    "device_util_pct": "mean device utilisation",
    "service_cpu_pct": "mean service CPU",
    "mem_used_mb": "mean device memory used",
    "cost_per_1m_embeddings": "cost per million embeddings (needs prices: the runs' cost block or --cost-*)",
}
_RULE_RE = re.compile(r"^\s*([a-z0-9_]+)\s*:\s*([+-])\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


class GateRule(BaseModel):
    metric: str
    sign: int  # +1: fail on a rise; -1: fail on a fall
    threshold: float
    relative: bool
    text: str

    def crossed(self, diff: float | None, rel: float | None) -> bool:
        """Whether a change (absolute diff in the metric's unit, rel as a fraction) crosses this rule."""
        if self.relative:
            return rel is not None and self.sign * rel * 100.0 > self.threshold
        scaled = diff * 100.0 if diff is not None and self.metric == "error_rate" else diff
        return scaled is not None and self.sign * scaled > self.threshold


def parse_gate(spec: str) -> list[GateRule]:
    rules = []
    for part in (p for p in spec.split(",") if p.strip()):
        match = _RULE_RE.match(part)
        if not match:
            raise ConfigError(
                f"gate rule {part.strip()!r} is not METRIC:+N% or METRIC:-N (e.g. 'p99_ms:+5%,qps:-3%,error_rate:+0.1')"
            )
        metric, sign, number, percent = match.groups()
        if metric not in GATE_METRICS:
            raise ConfigError(f"gate metric {metric!r} is unknown; valid metrics: {', '.join(GATE_METRICS)}")
        rules.append(GateRule(
            metric=metric, sign=1 if sign == "+" else -1, threshold=float(number), relative=bool(percent),
            text=part.strip(),
        ))  # fmt: skip
    if not rules:
        raise ConfigError("--gate is empty; give rules such as 'p99_ms:+5%,qps:-3%'")
    return rules


class BudgetScope(BaseModel):
    """The candidate's own request counts at one step (or overall), for the error-budget rule."""

    label: str
    n_requests: int
    n_failed: int


class StepChange(BaseModel):
    """The figures of a change a gate result quotes (a copy, so results serialise on their own)."""

    base: float | None
    cand: float | None
    diff: float | None
    rel: float | None
    ci_low: float | None
    ci_high: float | None


class GateResult(BaseModel):
    """One rule at one step: its status and a one-line reason with the numbers (English; `why` is the same
    reason as a code and its numbers, which the reports say in their own language)."""

    rule: str
    scope: str
    metric: str
    status: GateStatus
    reason: str
    why: dict[str, Any] | None = None
    change: StepChange | None = None

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    @property
    def line(self) -> str:
        return f"{self.rule} at {self.scope}: {self.reason}"


def fmt_value(metric: str, value: float | None, signed: bool = False) -> str:
    """A metric value in its unit; error rates as percentages."""
    if value is None:
        return "n/a"
    unit = METRIC_UNITS.get(metric, "")
    scaled = value * 100.0 if metric == ERROR_BUDGET_METRIC else value
    digits = 3 if metric == ERROR_BUDGET_METRIC else 1
    text = f"{scaled:+,.{digits}f}" if signed else f"{scaled:,.{digits}f}"
    return f"{text}%" if unit == "%" else f"{text} {unit}"


def change_reason(
    metric: str, base: float | None, cand: float | None, rel: float | None,
    ci: tuple[float | None, float | None],
) -> Reason:  # fmt: skip
    """Like: baseline 120.0 ms, candidate 140.0 ms, change +16.7% (95% CI of the difference ...)."""
    if metric == ERROR_BUDGET_METRIC and base is not None and cand is not None:
        change = f"{(cand - base) * 100.0:+.3f} pp"
    else:
        change = f"{rel * 100.0:+.1f}%" if rel is not None else "n/a"
    return reason(
        "change", base=fmt_value(metric, base), cand=fmt_value(metric, cand), change=change,
        low=fmt_value(metric, ci[0], True), high=fmt_value(metric, ci[1], True),
    )  # fmt: skip


def _result(
    rule: str, scope: str, metric: str, status: GateStatus, why: Reason, change: StepChange | None = None
) -> GateResult:
    return GateResult(
        rule=rule, scope=scope, metric=metric, status=status, reason=render_reason(why), why=why,
        change=change,
    )  # fmt: skip


def _speed_result(rule: GateRule, scope: StepComparison) -> GateResult:
    change = scope.metrics.get(rule.metric)
    quoted = set(StepChange.model_fields)
    figures = StepChange(**change.model_dump(include=quoted)) if change is not None else None

    def result(status: GateStatus, why: Reason) -> GateResult:
        return _result(rule.text, scope.label, rule.metric, status, why, figures)

    empty = missing_in(scope.base_n_ok, scope.cand_n_ok)
    if empty:
        return result("no_verdict", reason("rule_empty", sides=sides_reason(empty)))
    if change is None:
        return result("no_verdict", reason("rule_unmeasured", metric=rule.metric))
    text = change_reason(rule.metric, change.base, change.cand, change.rel, (change.ci_low, change.ci_high))
    if change.verdict == "no_verdict":
        return result("no_verdict", reason("rule_unsupported", why=change.why or reason("zero_width"), change=text))
    if rule.crossed(change.diff, change.rel):
        if change.verdict != "no_difference":
            return result("fail", reason("rule_fail", change=text, rule=rule.text))
        return result("pass", reason("rule_noise", change=text, rule=rule.text))
    return result("pass", reason("rule_pass", change=text))


BUDGET_RULE_PREFIX = "error_budget:"


def _budget_result(scope: BudgetScope, budget: float) -> GateResult:
    rule = f"{BUDGET_RULE_PREFIX}{budget * 100.0:g}%"
    if scope.n_requests == 0:
        return _result(rule, scope.label, ERROR_BUDGET_METRIC, "no_verdict", reason("budget_none"))
    rate = scope.n_failed / scope.n_requests
    numbers = {
        "rate": fmt_value(ERROR_BUDGET_METRIC, rate), "failed": f"{scope.n_failed:,}",
        "requests": f"{scope.n_requests:,}", "budget": fmt_value(ERROR_BUDGET_METRIC, budget),
    }  # fmt: skip
    status: GateStatus = "fail" if rate > budget else "pass"
    return _result(rule, scope.label, ERROR_BUDGET_METRIC, status, reason(f"budget_{status}", **numbers))


def empty_sides(base_n_ok: int, cand_n_ok: int) -> str | None:
    """Which run has no ok requests at a step ("baseline", "candidate", both), or None."""
    return " and the ".join(missing_in(base_n_ok, cand_n_ok)) or None


def evaluate_gate(
    rules: list[GateRule], steps: list[StepComparison], budget_scopes: list[BudgetScope], error_budget: float
) -> list[GateResult]:
    """Every rule at every matched step, then the error budget at every candidate step."""
    results = [_speed_result(rule, step) for step in steps for rule in rules]
    return results + [_budget_result(scope, error_budget) for scope in budget_scopes]


def gate_status(results: list[GateResult], reasons: list[str]) -> GateStatus:
    """fail if any rule failed (a failure is a verdict, whatever else could not be judged); else no
    verdict if anything could not be judged (a reason, or a rule without a verdict); else pass."""
    if any(r.failed for r in results):
        return "fail"
    if reasons or any(r.status == "no_verdict" for r in results):
        return "no_verdict"
    return "pass"


def failure_lines(results: list[GateResult]) -> list[str]:
    """One line per failed metric and step, the error budget first (a run that failed its requests is
    wrong before it is slow); an error_rate rule failing where the budget failed too joins its line."""
    failed = sorted((r for r in results if r.failed), key=lambda r: not r.rule.startswith(BUDGET_RULE_PREFIX))
    lines: dict[tuple[str, str], list[GateResult]] = {}
    for r in failed:
        lines.setdefault((r.scope, r.metric), []).append(r)
    return [first.line + "".join(f"; also fails {r.rule}" for r in rest) for first, *rest in lines.values()]

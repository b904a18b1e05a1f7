"""The product's verdict words: one vocabulary for compare, gate, search, canary, verify and capacity.

Two answers are kept apart everywhere because a reader acts on them differently:
- `no_difference` is a judgement: the data resolve the change and its 95% interval includes zero;
- `no_verdict` is the absence of one: too few samples, too short a window, no interval, no SLO given.
An interval that excludes zero is never "no difference", and a change the data cannot support is
never "better", "worse" or "no difference". Each command uses the subset that fits it (the Literal
types below); the words' texts, in English and Chinese, are the reports' catalogue's ([verdicts] in
reports/templates/i18n.toml).
"""

from __future__ import annotations

from typing import Literal

ChangeVerdict = Literal["better", "worse", "no_difference", "no_verdict"]  # compare, per metric and step
GateVerdict = Literal["pass", "fail", "no_verdict"]  # compare's gate, per rule and per candidate
ProbeVerdict = Literal["pass", "fail", "uncertain", "no_verdict"]  # search, per probe
CapacityVerdict = Literal["pass", "partial", "fail", "no_verdict"]  # a run's SLO over its steps
CanaryVerdict = Literal["promote", "rollback", "no_verdict"]  # canary, for the release
CheckVerdict = Literal["pass", "warn", "fail"]  # verify, per check (a check that cannot run fails)


def change_verdict(
    ci_low: float | None, ci_high: float | None, lower_is_better: bool, unsupported: bool = False
) -> ChangeVerdict:
    """A change's verdict from its 95% interval of candidate − baseline. `unsupported`: the data cannot back
    an interval (too few samples, too short): no verdict, whatever the interval says. No interval at all is no
    verdict too; one that includes zero is no difference."""
    if unsupported or ci_low is None or ci_high is None:
        return "no_verdict"
    if ci_low <= 0.0 <= ci_high:
        return "no_difference"
    rose = ci_low > 0.0
    return "worse" if rose == lower_is_better else "better"

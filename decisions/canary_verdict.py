"""A canary's verdict from its judged windows: the one place the rollback triggers are applied.

A pure function of the windows so far (in time order), the canary's configuration and its triggers:
the live monitor calls it after every window, tests call it on synthetic windows. Triggers per
window, the first that fires wins: candidate error rate, unavailable seconds, answer agreement,
device temperature, then the P99 limits, which fire only at the p99_windows-th consecutive window
over the limit. Exit codes: 0 promote, 1 roll back, 2 no verdict (a stage too thin to judge),
3 incomplete (the run ended before its last window was judged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from embedperf.canary_record import CanaryStatus, TriggerName, WindowJudgement
from embedperf.schema import StageRecord
from scenarios.canary_models import Canary, Rollback


@dataclass(frozen=True)
class CanaryVerdict:
    status: CanaryStatus
    line: str
    trigger: TriggerName | None = None
    stage_index: int | None = None
    window_index: int | None = None


def stage_windows(stage: StageRecord, canary: Canary) -> list[tuple[int, float, float]]:
    """(k, start, end) of each window of a stage: window_s long from the stage's real start, the last
    ones cut at its real end (a stage ticks over up to a second late or early)."""
    width = canary.window_s
    end_of_stage = stage.end_unix_s if stage.end_unix_s is not None else math.inf
    out = []
    for k in range(canary.windows_per_stage):
        start = stage.start_unix_s + k * width
        if start >= end_of_stage:
            break
        out.append((k, start, min(start + width, end_of_stage)))
    return out


def where(window: WindowJudgement) -> str:
    """`stage 2 (20%), window 3`: numbered from 1 for people; the record keeps 0-based indices."""
    return f"stage {window.stage_index + 1} ({window.weight_pct:g}%), window {window.window_index + 1}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def _p99_limit(
    window: WindowJudgement, baseline_p99_ms: float | None, rollback: Rollback
) -> tuple[float | None, TriggerName | None, str]:
    """The tightest P99 limit for the candidate in this window, which trigger sets it, and how it reads."""
    limits: list[tuple[float, TriggerName, str]] = []
    if rollback.max_p99_ms is not None:
        limits.append((rollback.max_p99_ms, "p99_ms", f"{rollback.max_p99_ms:g} ms"))
    if rollback.max_p99_increase_pct is not None and baseline_p99_ms is not None:
        limit = baseline_p99_ms * (1.0 + rollback.max_p99_increase_pct / 100.0)
        text = f"{limit:.1f} ms (baseline {baseline_p99_ms:.1f} ms +{rollback.max_p99_increase_pct:g}%)"
        limits.append((limit, "p99_increase", text))
    return min(limits, key=lambda item: item[0]) if limits else (None, None, "")


def annotate(
    windows: Sequence[WindowJudgement], canary: Canary, rollback: Rollback
) -> list[tuple[WindowJudgement, TriggerName | None, str]]:
    """Each window with its P99 limit, streak and thinness filled in, and the P99 trigger it fires (if any)."""
    out: list[tuple[WindowJudgement, TriggerName | None, str]] = []
    baseline_p99: float | None = None
    streak = 0
    for window in windows:
        if window.baseline.ok >= canary.min_window_requests and window.baseline.p99_ms is not None:
            baseline_p99 = window.baseline.p99_ms  # else the last window where the baseline had enough
        limit, name, limit_text = _p99_limit(window, baseline_p99, rollback)
        cand = window.candidate
        thin = cand.requests < canary.min_window_requests
        judged = cand.ok >= canary.min_window_requests and cand.p99_ms is not None and limit is not None
        over = bool(judged and cand.p99_ms is not None and limit is not None and cand.p99_ms > limit)
        streak = streak + 1 if over else 0
        annotated = window.model_copy(
            update={"p99_limit_ms": limit, "p99_over": over, "p99_streak": streak, "thin": thin}
        )
        if over and streak >= rollback.p99_windows:
            text = (
                f"candidate P99 {_ms(cand.p99_ms)} > {limit_text} in {streak} consecutive windows "
                f"(baseline P99 {_ms(window.baseline.p99_ms)})"
            )
            out.append((annotated, name, text))
        else:
            out.append((annotated, None, ""))
    return out


def window_trigger(
    window: WindowJudgement, canary: Canary, rollback: Rollback
) -> tuple[TriggerName, str] | None:
    """The first non-latency trigger this window fires, with its numbers."""
    cand, base = window.candidate, window.baseline
    rate, max_rate = cand.error_rate_pct, rollback.max_error_rate_pct
    judged = cand.requests >= canary.min_window_requests
    if max_rate is not None and judged and rate is not None and rate > max_rate:
        return "error_rate", (
            f"candidate error rate {_pct(rate)} > {rollback.max_error_rate_pct:g}% "
            f"({cand.errors} of {cand.requests}; baseline {_pct(base.error_rate_pct)})"
        )
    if rollback.max_unavailable_s is not None and cand.unavailable_s > rollback.max_unavailable_s:
        span_s = window.end_unix_s - window.start_unix_s
        return "unavailable", (
            f"candidate unavailable {cand.unavailable_s} s of {span_s:.0f} s > {rollback.max_unavailable_s:g} s "
            f"(baseline {base.unavailable_s} s)"
        )
    mean, floor = window.agreement_mean, rollback.min_agreement_cosine
    if floor is not None and window.agreement_n > 0 and mean is not None and mean < floor:
        low = f"; min {window.agreement_min:.4f}" if window.agreement_min is not None else ""
        return "agreement", (
            f"agreement cosine {mean:.4f} < {floor:g} "
            f"(mean of {window.agreement_n} texts sent to both sides{low})"
        )
    hottest_c = window.temp_c_max
    if rollback.max_temp_c is not None and hottest_c is not None and hottest_c > rollback.max_temp_c:
        return "temperature", f"candidate device temperature {hottest_c:.0f} C > {rollback.max_temp_c:g} C"
    return None


def judge(
    windows: Sequence[WindowJudgement], canary: Canary, rollback: Rollback, finished: bool
) -> tuple[list[WindowJudgement], CanaryVerdict]:
    """The annotated windows and the verdict: roll back at the first trigger; once every window is judged
    (finished), promote, or no verdict when a stage's candidate had fewer than min_stage_requests."""
    annotated = annotate(windows, canary, rollback)
    judged = [w for w, _, _ in annotated]
    for window, p99_trigger, p99_text in annotated:
        fired = window_trigger(window, canary, rollback)
        if fired is None and p99_trigger is not None:
            fired = (p99_trigger, p99_text)
        if fired is not None:
            name, text = fired
            line = f"ROLL BACK at {where(window)}: {text}"
            return judged, CanaryVerdict("rollback", line, name, window.stage_index, window.window_index)
    if not finished:
        return judged, CanaryVerdict("running", "")
    return judged, final_verdict(judged, canary)


def final_verdict(windows: Sequence[WindowJudgement], canary: Canary) -> CanaryVerdict:
    """Every window judged and no trigger fired: promote, unless some stage was too thin to judge."""
    for index, weight in enumerate(canary.stages_pct):
        n = sum(w.candidate.requests for w in windows if w.stage_index == index)
        if n < canary.min_stage_requests:
            return CanaryVerdict(
                "no_verdict",
                f"NO VERDICT at stage {index + 1} ({weight:g}%): the candidate had {n} requests "
                f"(< {canary.min_stage_requests}); hold each stage longer (--window-s, --windows-per-stage) "
                "or send more load",
                stage_index=index,
            )
    last = windows[-1]
    agreement = [w.agreement_min for w in windows if w.agreement_min is not None]
    agree_text = f", agreement cosine min {min(agreement):.5f}" if agreement else ""
    return CanaryVerdict(
        "promote",
        f"PROMOTE: {len(canary.stages_pct)} stages x {canary.windows_per_stage} windows, no trigger fired; "
        f"last window at {last.weight_pct:g}%: candidate P99 {_ms(last.candidate.p99_ms)}, error rate "
        f"{_pct(last.candidate.error_rate_pct)}{agree_text}",
    )

"""Adaptive steps (scenario `steps.until`): watch the recorded rows and say when a step's P99 is known.

The process that owns the run folder sees every row, its own users' or forwarded by workers once a second
(loadgen.distributed.rows), so a distributed run decides on the master from what it has received. Each ok
answer of the current step sent after its warm-up adds its latency; the load shape asks `decide` at every
tick, which takes the distribution-free P99 interval of those latencies (the capacity search's statistic,
decisions.search.stats.quantile_ci) and ends the step once it is narrow enough. Latencies under load are
not independent (one slow batch slows every request in it), so the interval counts the answers as
fewer independent ones by their dependence factor, measured in send order (decisions.search.stats.
ordered_dependence_factor): the report's interval does the same. Only the current step's latencies are
held, and only while it has `until`."""

from __future__ import annotations

import math
import threading
from typing import Any

from decisions.search.stats import QUANTILE, ordered_dependence_factor, quantile_ci
from embedperf.schema import REQUEST_COLUMNS, StepEnding
from loadgen.traffic.payloads import VALIDATION_PREFIX
from scenarios.until_models import Until

STAGE_POS = REQUEST_COLUMNS.index("stage_index")
OK_POS = REQUEST_COLUMNS.index("ok")
LATENCY_POS = REQUEST_COLUMNS.index("latency_ms")
SENT_POS = REQUEST_COLUMNS.index("t_sent_unix_s")
ENDPOINT_POS = REQUEST_COLUMNS.index("endpoint")
# The interval is recomputed at most this often (it sorts every latency of the step).
DECIDE_INTERVAL_S = 1.0
ROW_LAG_S = 1.0  # workers forward their rows once a second (loadgen.distributed.rows)


class UntilWatch:
    """The current adaptive step's ok latencies, and whether its P99 interval is narrow enough yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: int | None = None
        self._until: Until | None = None
        self._steady_from_unix_s = math.inf
        self._answers: list[tuple[float, float]] = []  # (sent unix s, latency ms)
        self._last_decided_unix_s = -math.inf
        self.last_reason: str | None = None  # the current step's ending once decided: converged | max_time

    def begin(self, index: int, start_unix_s: float, warmup_s: float, until: Until | None) -> None:
        """A step begins: forget the previous one's latencies."""
        with self._lock:
            self._index, self._until = index, until
            self._steady_from_unix_s = start_unix_s + warmup_s
            self._answers = []
            self._last_decided_unix_s = -math.inf
            self.last_reason = None

    def observe(self, values: list[Any]) -> None:
        """One recorded row (REQUEST_COLUMNS order, stage-tagged): runs once per request, so kept flat."""
        if self._until is None or values[STAGE_POS] != self._index or values[OK_POS] is not True:
            return
        sent, latency = values[SENT_POS], values[LATENCY_POS]
        if sent is None or latency is None or sent < self._steady_from_unix_s:
            return
        if str(values[ENDPOINT_POS] or "").startswith(VALIDATION_PREFIX):
            return
        with self._lock:
            self._answers.append((float(sent), float(latency)))

    def measure(self, reason: str = "converged", now_unix_s: float | None = None) -> StepEnding | None:
        """The step's P99 and its interval now (None for a step without `until`).

        Given `now_unix_s`, only the answers to requests sent before now less the slowest latency seen (and
        a second for rows forwarded by workers) count: the requests sent later that are still unanswered
        are the slow ones, and a decision on the fast ones that came back alone would judge the step too
        fast. The report counts every request the step sent, answered before or after its end."""
        until = self._until
        if until is None:
            return None
        with self._lock:
            answers = sorted(self._answers, key=lambda answer: answer[0])  # stable: ties keep arrival order
        if now_unix_s is not None and answers:
            complete_before_s = now_unix_s - max(latency for _, latency in answers) / 1000.0 - ROW_LAG_S
            answers = [answer for answer in answers if answer[0] < complete_before_s]
        latencies = [latency for _, latency in answers]
        dependence = ordered_dependence_factor(latencies, QUANTILE)
        point, low, high = quantile_ci(latencies, QUANTILE, until.confidence, dependence)
        bounded = point is not None and math.isfinite(low) and math.isfinite(high) and point > 0
        return StepEnding(
            reason="converged" if reason == "converged" else "max_time", target_rel_width=until.p99_rel_width,
            n_ok=len(latencies), p99_ms=point, p99_ci_low_ms=low if math.isfinite(low) else None,
            p99_ci_high_ms=high if math.isfinite(high) else None,
            rel_width=(high - low) / point if bounded and point else None, dependence=round(dependence, 3),
        )

    def converged(self, now_unix_s: float) -> StepEnding | None:
        """The step's ending when it may stop now (enough answers, time and a narrow enough interval)."""
        until = self._until
        if until is None or now_unix_s < self._steady_from_unix_s + until.min_s:
            return None
        if len(self._answers) < until.min_requests:
            return None
        if now_unix_s - self._last_decided_unix_s < DECIDE_INTERVAL_S:
            return None
        self._last_decided_unix_s = now_unix_s
        ending = self.measure(now_unix_s=now_unix_s)
        if ending is None or ending.n_ok < until.min_requests:
            return None
        if ending.rel_width is None or ending.rel_width > until.p99_rel_width:
            return None
        self.last_reason = ending.reason
        return ending

    def timed_out(self) -> StepEnding | None:
        """The ending of a step that reached its longest time (None for a step without `until`)."""
        ending = self.measure(reason="max_time")
        if ending is not None:
            self.last_reason = ending.reason
        return ending

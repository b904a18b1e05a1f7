"""The exit code of a load run, from what Locust counted: the one place a run's outcome becomes 0/1/3 (0 ok, 1
error budget exceeded or nothing succeeded, 3 incomplete; 2, usage or pre-flight, is raised before).
Validation probes are expected failures and not counted."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from loadgen.traffic.payloads import VALIDATION_PREFIX

EXIT_OK = 0
EXIT_BUDGET_FAILED = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3


@dataclass(frozen=True)
class RunVerdict:
    exit_code: int
    reason: str  # one line; empty when the run is ok
    n_requests: int
    n_failed: int


def run_verdict(stats: Any, error_budget_pct: float, completed: bool, stop_reason: str = "") -> RunVerdict:
    """Verdict from a Locust RequestStats (master or local process), the budget in percent."""
    n_requests = n_failed = 0
    for (name, _method), entry in stats.entries.items():
        if str(name).startswith(VALIDATION_PREFIX):
            continue
        n_requests += entry.num_requests  # Locust counts failed requests here too
        n_failed += entry.num_failures
    if not completed:
        why = f" ({stop_reason})" if stop_reason else ""
        return RunVerdict(
            EXIT_INCOMPLETE, f"run incomplete: stopped before the scenario's last stage ended{why}",
            n_requests, n_failed,
        )  # fmt: skip
    if n_requests == 0:
        return RunVerdict(EXIT_BUDGET_FAILED, "no requests were sent; nothing was measured", 0, 0)
    rate = n_failed / n_requests
    if rate * 100.0 <= error_budget_pct and n_failed < n_requests:
        return RunVerdict(EXIT_OK, "", n_requests, n_failed)
    return RunVerdict(
        EXIT_BUDGET_FAILED,
        f"error rate {rate:.2%} exceeds the scenario's error budget {error_budget_pct:g}% "
        f"({n_failed:,} of {n_requests:,} requests failed; most common: {most_common_error(stats)})",
        n_requests, n_failed,
    )


def most_common_error(stats: Any) -> str:
    errors = [e for e in stats.errors.values() if not str(e.name).startswith(VALIDATION_PREFIX)]
    if not errors:
        return "unknown"
    top = max(errors, key=lambda e: e.occurrences)
    return f"{top.error} ({top.occurrences:,}x)"


def set_exit_code(environment: Any, run: Any) -> RunVerdict | None:
    """Locust's quitting hook: set `environment.process_exit_code` and say why (no run: Locust's)."""
    if run is None:
        return None
    stats = environment.runner.stats if environment.runner is not None else environment.stats
    result = run_verdict(stats, run.scenario.slo.error_budget_pct, run.shape_completed, run.stop_reason)
    if result.reason:
        print(f"embedperf: {result.reason}", file=sys.stderr, flush=True)
    environment.process_exit_code = result.exit_code
    return result

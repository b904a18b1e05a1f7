"""Back-off after unanswered requests, and the run's exit code from what Locust counted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from embedperf.schema import RequestRow
from loadgen.lifecycle.verdict import EXIT_BUDGET_FAILED, EXIT_INCOMPLETE, EXIT_OK, run_verdict
from loadgen.traffic.backoff import BACKOFF_FIRST_S, BACKOFF_MAX_S, Backoff


def row(status: int | None, ok: bool) -> RequestRow:
    return RequestRow(status_code=status, ok=ok)


def test_backoff_doubles_to_a_cap_and_resets_on_any_answer() -> None:
    backoff = Backoff()
    delays = [backoff.after(row(None, False)) for _ in range(9)]
    assert delays[0] == BACKOFF_FIRST_S and delays[1] == 2 * BACKOFF_FIRST_S
    assert delays == sorted(delays) and delays[-1] == BACKOFF_MAX_S == max(delays)
    assert backoff.after(row(500, False)) == 0.0  # an HTTP error is an answer: no back-off
    assert backoff.after(row(None, False)) == BACKOFF_FIRST_S


@pytest.mark.parametrize("status", [429, 503])
def test_retry_later_answers_back_off_like_no_answer(status: int) -> None:
    """A shedding target (429/503) must not be hammered: the user waits, doubling to the cap."""
    backoff = Backoff()
    delays = [backoff.after(row(status, False)) for _ in range(3)]
    assert delays == [BACKOFF_FIRST_S, 2 * BACKOFF_FIRST_S, 4 * BACKOFF_FIRST_S]
    assert backoff.after(row(200, True)) == 0.0 and backoff.delay_s == 0.0
    assert backoff.after(row(400, False)) == 0.0


def locust_stats(entries: dict[str, tuple[int, int]], errors: dict[str, int]) -> SimpleNamespace:
    """The fields of locust.stats.RequestStats the verdict reads (num_requests counts failures too)."""
    return SimpleNamespace(
        entries={
            (name, "POST"): SimpleNamespace(num_requests=n, num_failures=f)
            for name, (n, f) in entries.items()
        },
        errors={
            text: SimpleNamespace(name="/v1/embeddings", error=text, occurrences=n)
            for text, n in errors.items()
        },
    )


@pytest.mark.parametrize(
    ("entries", "completed", "code", "says"),
    [
        ({"/v1/embeddings": (10_000, 5)}, True, EXIT_OK, ""),
        ({"/v1/embeddings": (10_000, 5), "validation:empty_must_fail": (50, 50)}, True, EXIT_OK, ""),
        ({"/v1/embeddings": (1_000, 2)}, True, EXIT_BUDGET_FAILED, "error rate 0.20% exceeds"),
        (
            {"/v1/embeddings": (116_435, 116_414)},
            True,
            EXIT_BUDGET_FAILED,
            "116,414 of 116,435 requests failed",
        ),
        ({"/v1/embeddings": (3, 3)}, True, EXIT_BUDGET_FAILED, "most common: ConnectionRefusedError (3x)"),
        ({}, True, EXIT_BUDGET_FAILED, "no requests were sent"),
        ({"/v1/embeddings": (10, 0)}, False, EXIT_INCOMPLETE, "run incomplete"),
    ],
)
def test_verdict(entries: dict[str, tuple[int, int]], completed: bool, code: int, says: str) -> None:
    stats = locust_stats(entries, {"ConnectionRefusedError": 3})
    verdict = run_verdict(stats, error_budget_pct=0.1, completed=completed)
    assert verdict.exit_code == code
    assert says in verdict.reason and (code != EXIT_OK or verdict.reason == "")

"""A failed request row's kind: one vocabulary of failures for the live view, summary.json and the report.

The load generator records what went wrong as a status code or an error text (loadgen.traffic.exchange);
every stage that counts failures by kind maps a row through `error_kind`, so the live view and the
analysis of the same run never disagree on what a failure was.
"""

from __future__ import annotations

# A request still in flight when the run stopped and its stop timeout ran out: recorded, never dropped.
CUT_OFF_PREFIX = "cut off:"


def error_kind(status_code: float | None, error: str | None) -> str:
    """One failed request's kind: connection_refused / connection_reset / timeout / http_<code> / ... Rows
    without a status never got an HTTP answer; their error text (the exception's name and message, as the
    exchange records it) tells refused from reset from timed out."""
    text = (error or "").lower()
    if status_code is not None and status_code == status_code and status_code > 0:
        code = int(status_code)
        return f"http_{code}" if code != 200 else "invalid_answer"
    if "refused" in text:
        return "connection_refused"
    if "reset" in text or "broken pipe" in text or "remotedisconnected" in text:
        return "connection_reset"
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if text.startswith("dropped"):
        return "dropped"
    if text.startswith(CUT_OFF_PREFIX):
        return "cut_off"
    return "connection_error" if text else "unknown"

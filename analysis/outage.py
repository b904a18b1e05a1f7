"""Outage windows: the stretches of a run when the target refused or dropped connections and answered nothing.

A dead target fails fast, so without this the failures of an outage look like throughput. The
window is found per whole second of send time: a second with connection errors and no successful
request is down; down seconds not separated by a second with a success form one window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from analysis.steps import OUTCOME_OK, classify_outcomes


class OutageWindow(BaseModel):
    """first..last whole second (unix) with connection errors and no success."""

    start_unix_s: float = Field(description="Start of the first down second.")
    end_unix_s: float = Field(description="End of the last down second.")
    duration_s: float
    n_connection_errors: int


def connection_error_mask(requests: pd.DataFrame, ok: np.ndarray) -> np.ndarray:
    """Failed rows that never got an HTTP answer because the connection failed (not timeouts)."""
    no_status = requests["status_code"].isna().to_numpy()
    text = requests["error"].astype(object).fillna("").astype(str).str.lower()
    connection = text.str.contains("refused") | text.str.contains("reset") | text.str.contains("connection")
    return no_status & ~ok & connection.to_numpy()


def outage_windows(requests: pd.DataFrame) -> list[OutageWindow]:
    """Windows over a run's raw request rows (every row, warm-up included: an outage has no warm-up).

    Seconds without any request (users backing off) inside a window do not split it; a second
    with a successful request does.
    """
    if not len(requests):
        return []
    ok = classify_outcomes(requests) == OUTCOME_OK
    conn = connection_error_mask(requests, ok)
    sent = requests["t_sent_unix_s"].to_numpy(dtype=np.float64)
    valid = np.isfinite(sent)
    if not (conn & valid).any():
        return []
    second = np.floor(sent[valid]).astype(np.int64)
    per_s = pd.DataFrame({"s": second, "conn": conn[valid], "ok": ok[valid]}).groupby("s").sum()
    return windows_from_seconds(
        [
            (int(sec), int(n_conn), int(n_ok))
            for sec, n_conn, n_ok in zip(per_s.index, per_s["conn"], per_s["ok"], strict=True)
        ]
    )


def windows_from_seconds(per_second: list[tuple[int, int, int]]) -> list[OutageWindow]:
    """(second, connection errors, successes) per second with requests, in time order -> the windows."""
    windows: list[OutageWindow] = []
    first = last = None
    n = 0
    for sec, n_conn, n_ok in per_second:
        if n_ok > 0:
            if first is not None and last is not None:
                windows.append(_window(first, last, n))
            first = last = None
            n = 0
        elif n_conn > 0:
            first = sec if first is None else first
            last = sec
            n += n_conn
    if first is not None and last is not None:
        windows.append(_window(first, last, n))
    return windows


def _window(first_s: int, last_s: int, n: int) -> OutageWindow:
    return OutageWindow(
        start_unix_s=float(first_s),
        end_unix_s=float(last_s + 1),
        duration_s=float(last_s + 1 - first_s),
        n_connection_errors=n,
    )

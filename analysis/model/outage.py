"""Outage windows: the stretches of a run when the target refused or dropped connections and answered nothing.

A dead target fails fast, so without this the failures of an outage look like throughput. The
window is found per whole second of send time: a second with connection errors and no successful
request is down; down seconds not separated by a second with a success form one window.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class OutageWindow(BaseModel):
    """first..last whole second (unix) with connection errors and no success."""

    start_unix_s: float = Field(description="Start of the first down second.")
    end_unix_s: float = Field(description="End of the last down second.")
    duration_s: float
    n_connection_errors: int


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
    end = float(last_s + 1)
    return OutageWindow(
        start_unix_s=float(first_s), end_unix_s=end, duration_s=end - first_s, n_connection_errors=n
    )

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
    down: list[tuple[int, int]] = []  # (second, connection errors) of the window under way
    for sec, n_conn, n_ok in [*per_second, (0, 0, 1)]:  # a success after the last second closes its window
        if n_ok > 0 and down:
            first, end, errors = float(down[0][0]), float(down[-1][0] + 1), sum(n for _, n in down)
            windows.append(OutageWindow(
                start_unix_s=first, end_unix_s=end, duration_s=end - first, n_connection_errors=errors
            ))  # fmt: skip
            down = []
        elif n_ok == 0 and n_conn > 0:
            down.append((sec, n_conn))
    return windows

"""Availability seconds: the seconds of a window in which no request succeeded.

Clients back off during an outage and send few requests, so the error rate understates it (an 18 s
outage can be 45 failed requests, 11% of a run, while a whole step had no goodput). A window of
`n` seconds is cut into `n` one-second bins from its own start; a bin is unavailable when no ok
answer completed in it and it was wanted:

- every bin of a closed-loop step (the users always want to send; backing off is part of the outage);
- for a share of the traffic (open loop, a canary's side), a bin in which a request of that share
  ended without success, or that a failed request spanned from before its start to after its end (a
  hang that timed out, or one never answered), so that a bin which merely drew no request of a small
  share, or only a slow answer still on its way, is not counted.

The live canary monitor (loadgen) and the analysis (DuckDB) both bin their rows and call
`unavailable_seconds`, so the two agree on what counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def bin_count(start_unix_s: float, end_unix_s: float) -> int:
    """Whole one-second bins in the window (a partial last second is not judged)."""
    return max(int(math.floor(end_unix_s - start_unix_s + 1e-9)), 0)


def bin_of(t_unix_s: float, start_unix_s: float) -> int:
    """The bin (from the window start) that instant t falls in; may lie outside the window."""
    return int(math.floor(t_unix_s - start_unix_s))


def spanned_bins(
    t_sent_unix_s: float, t_done_unix_s: float | None, start_unix_s: float, n_bins: int
) -> tuple[int, int]:
    """(first, last) bin lying wholly inside [sent, done], first > last if none; done None: still waiting at
    the window's end."""
    first = int(math.ceil(t_sent_unix_s - start_unix_s - 1e-9))
    last = n_bins - 1 if t_done_unix_s is None else int(math.floor(t_done_unix_s - start_unix_s)) - 1
    return first, last


def unavailable_seconds(
    n_bins: int,
    ok_bins: Iterable[int],
    failed_bins: Iterable[int] = (),
    spans: Iterable[tuple[int, int]] = (),
    every_bin_wanted: bool = False,
) -> int:
    """Bins of the window without an ok completion that were wanted (see the module doc). ok_bins: the bin of
    each ok completion; failed_bins: of each completion (or drop) that was not ok; spans: (first, last) whole
    bins each failed request hung through (spanned_bins). Bins outside 0..n-1 are ignored."""
    if n_bins <= 0:
        return 0
    ok = np.zeros(n_bins, dtype=bool)
    ok_idx = np.fromiter(ok_bins, dtype=np.int64)
    ok[ok_idx[(ok_idx >= 0) & (ok_idx < n_bins)]] = True
    if every_bin_wanted:
        wanted = np.ones(n_bins, dtype=bool)
    else:
        wanted = np.zeros(n_bins, dtype=bool)
        failed_idx = np.fromiter(failed_bins, dtype=np.int64)
        wanted[failed_idx[(failed_idx >= 0) & (failed_idx < n_bins)]] = True
        for first, last in spans:
            lo, hi = max(first, 0), min(last, n_bins - 1)
            if lo <= hi:
                wanted[lo : hi + 1] = True
    return int(np.count_nonzero(wanted & ~ok))

"""Availability seconds of a window from the raw rows (DuckDB), as embedperf.availability defines them.

The rows are binned in SQL (one row per second that had completions, one per request that hung through
a whole second), so memory stays bounded whatever the window's length; embedperf.availability decides
which bins count, the same function the live canary monitor calls.
"""

from __future__ import annotations

import duckdb

from embedperf.availability import bin_count, unavailable_seconds

HANG_S = 1.0  # only a request open this long can span a whole one-second bin


def window_unavailable_s(
    con: duckdb.DuckDBPyConnection, start_unix_s: float, end_unix_s: float, side: str | None = None,
    every_bin_wanted: bool = False,
) -> int:  # fmt: skip
    """Seconds of [start, end) without an ok completion (see embedperf.availability), over the `tagged`
    view (analysis.engine.views.create_views); `side` keeps one side of a canary. Validation probes are left out."""
    n_bins = bin_count(start_unix_s, end_unix_s)
    if n_bins == 0:
        return 0
    where = "NOT probe" + (" AND side = ?" if side is not None else "")
    params: list[object] = [side] if side is not None else []
    ended = con.execute(
        f"SELECT floor(t_done_unix_s - ?)::BIGINT AS bin, outcome = 0 AS good, count(*) FROM tagged "
        f"WHERE {where} AND t_done_unix_s >= ? AND t_done_unix_s < ? GROUP BY ALL",
        [start_unix_s, *params, start_unix_s, end_unix_s],
    ).fetchall()
    ok_bins = [int(b) for b, good, _ in ended if good]
    failed_bins = [int(b) for b, good, _ in ended if not good]
    spans: list[tuple[int, int]] = []
    if not every_bin_wanted:
        hung = con.execute(
            f"SELECT ceil(t_sent_unix_s - ? - 1e-9)::BIGINT, "
            f"CASE WHEN t_done_unix_s IS NULL THEN {n_bins - 1} ELSE floor(t_done_unix_s - ?)::BIGINT - 1 END "
            f"FROM tagged WHERE {where} AND outcome <> 0 AND t_sent_unix_s < ? "
            f"AND (t_done_unix_s IS NULL OR (t_done_unix_s > ? AND t_done_unix_s - t_sent_unix_s >= {HANG_S}))",
            [start_unix_s, start_unix_s, *params, end_unix_s, start_unix_s],
        ).fetchall()
        spans = [(int(first), int(last)) for first, last in hung]
    return unavailable_seconds(n_bins, ok_bins, failed_bins, spans, every_bin_wanted=every_bin_wanted)

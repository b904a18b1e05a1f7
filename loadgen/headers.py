"""Parse the service's `Server-Timing` and batch headers into request-row columns."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from embedperf.schema import BATCH_SIZE_HEADER, BATCH_TOKENS_HEADER, SERVER_TIMING_COLUMNS

# `name;...;dur=1.2` entries: one findall in C instead of splitting every entry in Python,
# as this runs once per request (a few microseconds either way, half of it here).
_TIMING_ENTRY = re.compile(r'([^\s,;]+)\s*;[^,]*?\bdur\s*=\s*"?([^",;\s]*)')


def parse_server_timing(header: str | None) -> dict[str, float]:
    """`queue;dur=1.2, compute;dur=5.1` -> `{"srv_queue_ms": 1.2, "srv_compute_ms": 5.1}`.

    Unknown metrics and malformed entries are ignored: a target that sends something else
    simply leaves the columns empty.
    """
    out: dict[str, float] = {}
    if not header:
        return out
    for name, value in _TIMING_ENTRY.findall(header):
        column = SERVER_TIMING_COLUMNS.get(name)
        if column is not None:
            try:
                out[column] = float(value)
            except ValueError:
                continue
    return out


def _int_or_none(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def timing_columns(get_header: Callable[[str], str | None]) -> dict[str, Any]:
    """Server-Timing plus batch headers, via a case-insensitive header getter."""
    cols: dict[str, Any] = parse_server_timing(get_header("Server-Timing"))
    batch_size = _int_or_none(get_header(BATCH_SIZE_HEADER))
    if batch_size is not None:
        cols["batch_size"] = batch_size
    batch_tokens = _int_or_none(get_header(BATCH_TOKENS_HEADER))
    if batch_tokens is not None:
        cols["batch_tokens"] = batch_tokens
    return cols


SERVER_TIMING_ORDER: tuple[str, ...] = tuple(SERVER_TIMING_COLUMNS.values())
TIMING_VALUE_COLUMNS: tuple[str, ...] = (*SERVER_TIMING_ORDER, "batch_size", "batch_tokens")


def timing_values(get_header: Callable[[str], str | None]) -> list[Any]:
    """The TIMING_VALUE_COLUMNS in that order (None where absent): the tail of a request row."""
    values: list[Any] = [None] * len(TIMING_VALUE_COLUMNS)
    header = get_header("Server-Timing")
    if header:
        for name, value in _TIMING_ENTRY.findall(header):
            pos = _TIMING_POS.get(name)
            if pos is not None:
                try:
                    values[pos] = float(value)
                except ValueError:
                    continue
    values[5] = _int_or_none(get_header(BATCH_SIZE_HEADER))
    values[6] = _int_or_none(get_header(BATCH_TOKENS_HEADER))
    return values


_TIMING_POS = {name: SERVER_TIMING_ORDER.index(col) for name, col in SERVER_TIMING_COLUMNS.items()}

"""Parse the service's `Server-Timing` and batch headers into request-row columns."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from embedperf.schema import BATCH_SIZE_HEADER, BATCH_TOKENS_HEADER, SERVER_TIMING_COLUMNS


def parse_server_timing(header: str | None) -> dict[str, float]:
    """`queue;dur=1.2, compute;dur=5.1` -> `{"srv_queue_ms": 1.2, "srv_compute_ms": 5.1}`.

    Unknown metrics and malformed entries are ignored: a target that sends something else
    simply leaves the columns empty.
    """
    out: dict[str, float] = {}
    if not header:
        return out
    for entry in header.split(","):
        name, _, params = entry.strip().partition(";")
        column = SERVER_TIMING_COLUMNS.get(name.strip())
        if column is None:
            continue
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip() == "dur":
                with contextlib.suppress(ValueError):
                    out[column] = float(value.strip().strip('"'))
                break
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

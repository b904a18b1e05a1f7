"""Parse the service's `Server-Timing` and batch headers into request-row columns."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from embedperf.schema import BATCH_SIZE_HEADER, BATCH_TOKENS_HEADER, SERVER_TIMING_COLUMNS

# `name;...;dur=1.2` entries, in any order and with any parameters.
_TIMING_ENTRY = re.compile(r'([^\s,;]+)\s*;[^,]*?\bdur\s*=\s*"?([^",;\s]*)')
# The layout the reference service and the stub send, matched in one pass: per request this
# costs a third of the general findall-and-loop, which stays the fallback for anything else.
_VALUE = r'([^",;\s]*)'
_SERVICE_LAYOUT = re.compile(
    f"queue;dur={_VALUE}, tokenize;dur={_VALUE}, compute;dur={_VALUE}, post;dur={_VALUE}, total;dur={_VALUE}"
)


def parse_server_timing(header: str | list[str] | None) -> dict[str, float]:
    """`queue;dur=1.2, compute;dur=5.1` -> `{"srv_queue_ms": 1.2, "srv_compute_ms": 5.1}`.

    Unknown metrics and malformed entries are ignored: a target that sends something else
    simply leaves the columns empty.
    """
    out: dict[str, float] = {}
    if not header:
        return out
    if not isinstance(header, str):
        header = ", ".join(header)
    for name, value in _TIMING_ENTRY.findall(header):
        column = SERVER_TIMING_COLUMNS.get(name)
        if column is not None:
            try:
                out[column] = float(value)
            except ValueError:
                continue
    return out


def _int_or_none(value: str | list[str] | None) -> int | None:
    if value is None or not isinstance(value, str):
        return None
    try:
        return int(value)  # int() ignores surrounding whitespace
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
    """The TIMING_VALUE_COLUMNS in that order (None where absent): the tail of a request row.

    Runs once per request, hence written flat: the service's own layout is read with one regex
    match, anything else (other order, parameters, unknown metrics, several header lines) by the
    general parser.
    """
    header = get_header("Server-Timing")
    values: list[Any] | None = None
    if header and isinstance(header, str) and (layout := _SERVICE_LAYOUT.fullmatch(header)) is not None:
        queue, tokenize, compute, post, total = layout.groups()
        try:
            values = [float(queue), float(tokenize), float(compute), float(post), float(total), None, None]
        except ValueError:  # an empty or odd value: the general parser leaves just that column empty
            values = None
    if values is None:
        values = [None, None, None, None, None, None, None]
        if header:
            for name, value in _TIMING_ENTRY.findall(
                header if isinstance(header, str) else ", ".join(header)
            ):
                pos = _TIMING_POS.get(name)
                if pos is not None:
                    try:
                        values[pos] = float(value)
                    except ValueError:
                        continue
    size = get_header(BATCH_SIZE_HEADER)
    if size is not None:
        values[5] = _int_or_none(size)
    tokens = get_header(BATCH_TOKENS_HEADER)
    if tokens is not None:
        values[6] = _int_or_none(tokens)
    return values


_TIMING_POS = {name: SERVER_TIMING_ORDER.index(col) for name, col in SERVER_TIMING_COLUMNS.items()}
assert SERVER_TIMING_ORDER == (
    "srv_queue_ms",
    "srv_tokenize_ms",
    "srv_compute_ms",
    "srv_post_ms",
    "srv_total_ms",
)
assert TIMING_VALUE_COLUMNS[5:] == ("batch_size", "batch_tokens"), (
    "timing_values fills the row tail by position"
)

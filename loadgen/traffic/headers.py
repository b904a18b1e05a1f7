"""Parse the service's `Server-Timing` and batch headers into request-row columns."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from embedperf.schema import BATCH_SIZE_HEADER, BATCH_TOKENS_HEADER, SERVER_TIMING_COLUMNS

# `name;...;dur=1.2` entries, in any order and with any parameters.
_TIMING_ENTRY = re.compile(r'([^\s,;]+)\s*;[^,]*?\bdur\s*=\s*"?([^",;\s]*)')


def parse_server_timing(header: str | list[str] | None) -> dict[str, float]:
    """`queue;dur=1.2, compute;dur=5.1` -> `{"srv_queue_ms": 1.2, "srv_compute_ms": 5.1}`; others ignored."""
    out: dict[str, float] = {}
    for name, value in _TIMING_ENTRY.findall(header if isinstance(header, str) else ", ".join(header or ())):
        column = SERVER_TIMING_COLUMNS.get(name)
        if column is not None:
            with suppress(ValueError):
                out[column] = float(value)
    return out


def int_or_none(value: object) -> int | None:
    """A header's integer value (None when absent, repeated or not an integer)."""
    if not isinstance(value, str):
        return None
    try:
        return int(value)  # int() ignores surrounding whitespace
    except ValueError:
        return None


SERVER_TIMING_ORDER: tuple[str, ...] = tuple(SERVER_TIMING_COLUMNS.values())
TIMING_VALUE_COLUMNS: tuple[str, ...] = (*SERVER_TIMING_ORDER, "batch_size", "batch_tokens")
assert SERVER_TIMING_ORDER == ("srv_queue_ms", "srv_tokenize_ms", "srv_compute_ms", "srv_post_ms", "srv_total_ms")


def timing_values(get_header: Callable[[str], str | None]) -> list[Any]:
    """The TIMING_VALUE_COLUMNS in that order (None where absent), read from one answer's headers: the
    row-by-row way of parse_raw_timing, for any header the bulk parse does not match."""
    parsed = parse_server_timing(get_header("Server-Timing"))
    return [
        *(parsed.get(column) for column in SERVER_TIMING_ORDER), int_or_none(get_header(BATCH_SIZE_HEADER)),
        int_or_none(get_header(BATCH_TOKENS_HEADER)),
    ]


_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
# The service's layout with plain decimal values: Arrow extracts and converts those for a whole
# batch in C; any other header (and any other number spelling) goes through timing_values.
_BULK_LAYOUT = (
    f"^queue;dur=(?P<queue>{_NUMBER}), tokenize;dur=(?P<tokenize>{_NUMBER}), compute;dur=(?P<compute>{_NUMBER}), "
    f"post;dur=(?P<post>{_NUMBER}), total;dur=(?P<total>{_NUMBER})$"
)
_BULK_INT = r"^\s*-?[0-9]+\s*$"


def raw_timing_values(get_header: Callable[[str], str | list[str] | None]) -> list[Any]:
    """The row tail as the request path stores it: the raw header values, parsed later by parse_raw_timing."""
    return [
        get_header("Server-Timing"), None, None, None, None, get_header(BATCH_SIZE_HEADER),
        get_header(BATCH_TOKENS_HEADER),
    ]


def parse_raw_timing(columns: list[Any], start: int) -> None:
    """Replace the raw header columns at columns[start : start + 7] with the parsed TIMING_VALUE_COLUMNS: a
    batch in the service's layout in a few Arrow calls, else row by row; parsed rows pass unchanged."""
    timing = columns[start]
    sizes, tokens = columns[start + 5], columns[start + 6]
    if any(columns[start + i].count(None) != len(timing) for i in range(1, 5)):
        _parse_rows(columns, start)  # some rows hold parsed values
        return
    try:
        raw = pa.array(timing, type=pa.string())
        raw_sizes = pa.array(sizes, type=pa.string())
        raw_tokens = pa.array(tokens, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # parsed values, repeated headers or a mix
        _parse_rows(columns, start)
        return
    parts = pc.extract_regex(raw, _BULK_LAYOUT)
    unmatched = pc.sum(pc.and_(raw.is_valid(), parts.is_null())).as_py() or 0
    ints = [pc.match_substring_regex(array, _BULK_INT) for array in (raw_sizes, raw_tokens)]
    bad_ints = sum(pc.sum(pc.invert(match)).as_py() or 0 for match in ints)
    if unmatched or bad_ints:
        _parse_rows(columns, start)
        return
    for i, name in enumerate(("queue", "tokenize", "compute", "post", "total")):
        columns[start + i] = pc.cast(pc.struct_field(parts, name), pa.float64())  # null where no header
    columns[start + 5] = pc.cast(pc.utf8_trim_whitespace(raw_sizes), pa.int64())
    columns[start + 6] = pc.cast(pc.utf8_trim_whitespace(raw_tokens), pa.int64())


def _parse_rows(columns: list[Any], start: int) -> None:
    """Row by row: raw header values through timing_values, parsed values kept as they are."""
    width = len(TIMING_VALUE_COLUMNS)
    out: list[list[Any]] = [list(columns[start + i]) for i in range(width)]
    names = ("Server-Timing", BATCH_SIZE_HEADER, BATCH_TOKENS_HEADER)
    for row, raw in enumerate(zip(out[0], out[5], out[6], strict=True)):
        if not any(isinstance(value, str | list) for value in raw):
            continue  # already parsed
        headers = dict(zip(names, raw, strict=True))
        for i, value in enumerate(timing_values(headers.get)):
            out[i][row] = value
    columns[start : start + width] = out


def header_text_column(values: Sequence[Any]) -> pa.Array:
    """A batch of raw X-Served-Model values as one string column, a repeated header joined with ", "."""
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(
            [", ".join(map(str, v)) if isinstance(v, list | tuple) else v for v in values], type=pa.string()
        )

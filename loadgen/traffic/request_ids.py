"""Request IDs `<prefix>-<counter>`, unique in a run, that the service echoes and logs: a random 48-bit prefix
per generator process (no coordination between workers) and a counter, both in hex."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator

PREFIX_BYTES = 6  # 48 bits: two of 1,000 generator processes share a prefix with odds below 2e-9


def request_ids(prefix: str | None = None) -> Iterator[str]:
    """An endless iterator of IDs; `next()` on it is the per-request cost (one C-level format call)."""
    head = prefix if prefix is not None else secrets.token_hex(PREFIX_BYTES)
    return map(f"{head}-{{:x}}".format, itertools.count(1))

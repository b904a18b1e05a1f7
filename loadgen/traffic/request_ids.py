"""Request IDs: every request carries a short ID, unique in its run, that the service echoes and logs.

An ID is `<prefix>-<counter>`: a random 48-bit prefix drawn once per generator process (so the processes of a
distributed run need no coordination) and a per-process counter, both in hex. A report's slowest requests show
it, and the service's access log finds the request by it."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator

PREFIX_BYTES = 6  # 48 bits: two of 1,000 generator processes share a prefix with odds below 2e-9


def request_ids(prefix: str | None = None) -> Iterator[str]:
    """An endless iterator of IDs; `next()` on it is the per-request cost (one C-level format call)."""
    head = prefix if prefix is not None else secrets.token_hex(PREFIX_BYTES)
    return map(f"{head}-{{:x}}".format, itertools.count(1))

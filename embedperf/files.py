"""Files written whole or not at all: a reader (a CI job, a test watching a run) never sees half a file."""

from __future__ import annotations

from pathlib import Path


def write_atomically(path: Path, text: str) -> Path:
    """`text` written beside `path` and renamed over it, its folder made if need be; returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    return tmp.replace(path)  # os.replace: atomic on one file system

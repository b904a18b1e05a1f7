"""The fp32 reference vectors of a text set, computed once per model and kept on disk.

Embedding the shipped corpus costs ~9 s of CPU, so the vectors are kept in the cache folder
($EMBEDPERF_CACHE_DIR, off: never), keyed by the model folder's files, the torch and transformers versions
and the texts. A cache that fails is skipped with a warning; processes computing the same vectors take a lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from embedperf.cache_folder import CACHE_ENV, cache_dir

log = logging.getLogger("study.reference_vectors")

KEY_VERSION = "embedperf fp32 reference v1"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def reference_key(model_dir: Path, texts: Sequence[str]) -> str:
    """A digest of what the vectors depend on: the model folder's files, the libraries, the texts."""
    digest = hashlib.sha256(
        f"{KEY_VERSION}|torch {_version('torch')}|transformers {_version('transformers')}\n".encode()
    )
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(
            f"{path.relative_to(model_dir).as_posix()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode()
        )
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:32]


def fp32_reference_vectors(
    model_dir: Path, texts: Sequence[str], encode: Callable[[], np.ndarray]
) -> np.ndarray:
    """The fp32 vectors of `texts` by the model in `model_dir`: from the cache, or `encode()` (then kept)."""
    if (directory := cache_dir()) is None:
        return encode()
    path = directory / f"fp32-{reference_key(model_dir, texts)}.npy"
    if (cached := _read(path, len(texts))) is not None:
        return cached
    with _computing(path):  # another process computing the same vectors: wait for them, then read
        if (cached := _read(path, len(texts))) is not None:
            return cached
        vectors = np.ascontiguousarray(encode(), dtype=np.float32)
        _write(path, vectors)
    return vectors


@contextlib.contextmanager
def _computing(path: Path) -> Iterator[None]:
    """Hold `<key>.lock` while the vectors are computed, so processes that need the same ones at once
    (parallel precision checks, test workers) compute them once. A lock that cannot be taken is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_suffix(".lock"), "ab")  # noqa: SIM115 - held across the yield
    except OSError:
        yield
        return
    with handle:
        with contextlib.suppress(OSError):  # a file system without locks: compute without waiting
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _read(path: Path, rows: int) -> np.ndarray | None:
    if not path.is_file():
        return None
    try:
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        log.warning("cached reference vectors %s unreadable (%s); computing them again", path, exc)
        return None
    if vectors.ndim != 2 or vectors.shape[0] != rows or vectors.dtype != np.float32:
        log.warning("cached reference vectors %s have shape %s; computing them again", path, vectors.shape)
        return None
    return vectors


def _write(path: Path, vectors: np.ndarray) -> None:
    """Write beside the final name, then rename: a reader never sees half a file."""
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(part, "wb") as fh:
            np.save(fh, vectors, allow_pickle=False)
        os.replace(part, path)
    except OSError as exc:
        log.warning(
            "cannot keep reference vectors in %s (%s); set %s=off to stop trying", path.parent, exc, CACHE_ENV
        )
        with contextlib.suppress(OSError):
            part.unlink()

"""Result caches: the in-process LRU keyed by input text (one model per process), then a shared one in Redis.

Redis lets replicas and restarts share embeddings; an outage costs speed, never answers. Key:
`embedperf:<model>:<precision variant>:<sha256 of the NFC-normalised text>`. NFC is the only normalisation: it
never changes what the tokenisers of the supported models see (BERT-style NFD and SentencePiece NFKC normalise
at least that much), whereas case folding or whitespace trimming would. Value: uint32 token count + float32
little-endian vector. Any Redis error marks the cache down: requests are computed without it, /health and
`embedperf_cache_up` say so, and one request probes Redis again after a back-off that doubles up to
`retry_max_s`."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import struct
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from service.metrics import ServiceMetrics
from service.settings import redact_url


class CachedEmbedding(NamedTuple):
    vector: np.ndarray
    tokens: int


class EmbeddingCache:
    """Bounded LRU; size 0 disables it (every lookup misses, nothing is stored)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, CachedEmbedding] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, text: str) -> CachedEmbedding | None:
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(text)
            if entry is not None:
                self._entries.move_to_end(text)
            return entry

    def put(self, text: str, vector: np.ndarray, tokens: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._entries[text] = CachedEmbedding(vector, tokens)
            self._entries.move_to_end(text)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)


@dataclass
class CacheLookup:
    """What the caches hold for one request's inputs; `shared_down` when Redis could not be asked."""

    entries: list[CachedEmbedding | None]
    shared_down: bool = False

    @property
    def missing(self) -> list[int]:
        return [i for i, entry in enumerate(self.entries) if entry is None]

    def header(self) -> str:
        """X-Cache: hit (every input cached), partial (some), miss (none), bypass (Redis down, not all hit). A
        multi-input request is a hit only when every input was; partial says the request still waited for the
        device, so a client timing it knows it was not a pure cache answer."""
        found = len(self.entries) - len(self.missing)
        if found == len(self.entries):
            return "hit"
        if self.shared_down:
            return "bypass"
        return "partial" if found else "miss"


@dataclass(eq=False)
class ResultCache:
    """The in-process LRU, then the shared Redis cache; counts hits and misses per input."""

    local: EmbeddingCache
    shared: RedisCache | None
    metrics: ServiceMetrics

    @property
    def enabled(self) -> bool:
        return self.local.enabled or self.shared is not None

    async def lookup(self, texts: list[str]) -> CacheLookup:
        result = CacheLookup([self.local.get(text) for text in texts])
        if self.shared is not None and result.missing:
            missing = result.missing
            shared = await self.shared.get_many([texts[i] for i in missing])
            if shared is None:
                result.shared_down = True
            else:
                for index, entry in zip(missing, shared, strict=True):
                    if entry is not None:
                        result.entries[index] = entry
                        self.local.put(texts[index], entry.vector, entry.tokens)
        if self.enabled:
            self.metrics.cache_hits.inc(len(texts) - len(result.missing))
            self.metrics.cache_misses.inc(len(result.missing))
        return result

    async def store(self, entries: list[tuple[str, np.ndarray, int]]) -> None:
        for text, vector, tokens in entries:
            self.local.put(text, vector, tokens)
        if self.shared is not None:
            await self.shared.put_many(entries)


log = logging.getLogger("service.cache_redis")
REDIS_TIMEOUT_S = 0.25  # a cache slower than this is worse than no cache for an embedding request
FIRST_RETRY_S = 0.25
_TOKENS = struct.Struct("<I")


def cache_key(namespace: str, text: str) -> str:
    digest = hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{namespace}:{digest}"


def encode_entry(vector: np.ndarray, tokens: int) -> bytes:
    return _TOKENS.pack(tokens) + np.asarray(vector, dtype="<f4").tobytes()


def decode_entry(raw: bytes, dimension: int) -> CachedEmbedding | None:
    """None for a value of the wrong size (another model's entry under a reused key, or corruption)."""
    if len(raw) != _TOKENS.size + 4 * dimension:
        return None
    (tokens,) = _TOKENS.unpack_from(raw)
    vector = np.frombuffer(raw, dtype="<f4", offset=_TOKENS.size).astype(np.float32)
    return CachedEmbedding(vector, tokens)


@dataclass(eq=False)
class RedisCache:
    """Async Redis client with outage tracking; every method is safe to call while Redis is down."""

    url: str
    namespace: str
    dimension: int
    ttl_s: int
    retry_max_s: float
    metrics: ServiceMetrics
    timeout_s: float = REDIS_TIMEOUT_S

    def __post_init__(self) -> None:
        self.connected = False
        self.reason = "not connected yet"
        self._retry_s = min(FIRST_RETRY_S, self.retry_max_s)
        self._next_attempt_s = 0.0
        self._client: aioredis.Redis | None = None
        self.metrics.cache_up.set(0)

    def _redis(self) -> aioredis.Redis:
        if self._client is None:  # created on first use, inside the serving event loop
            self._client = aioredis.Redis.from_url(
                self.url,
                socket_timeout=self.timeout_s,
                socket_connect_timeout=self.timeout_s,
                retry_on_timeout=False,
                retry=Retry(NoBackoff(), 0),
            )
        return self._client

    def status(self) -> dict[str, Any]:
        """The /health `cache` entry."""
        status: dict[str, Any] = {"kind": "redis", "url": redact_url(self.url), "connected": self.connected}
        if not self.connected:
            status["reason"] = self.reason
            status["retry_in_s"] = round(max(0.0, self._next_attempt_s - time.monotonic()), 2)
        return status

    def _may_try(self) -> bool:
        """Up: always. Down: one caller per back-off interval gets to probe; the others skip the cache."""
        if self.connected:
            return True
        now_s = time.monotonic()
        if now_s < self._next_attempt_s:
            return False
        self._next_attempt_s = now_s + self._retry_s
        self._retry_s = min(self._retry_s * 2, self.retry_max_s)
        return True

    def _up(self) -> None:
        if not self.connected:
            log.info("shared cache %s is reachable; using it", redact_url(self.url))
        self.connected = True
        self.reason = ""
        self._retry_s = min(FIRST_RETRY_S, self.retry_max_s)
        self.metrics.cache_up.set(1)

    def _down(self, exc: BaseException) -> None:
        self.metrics.cache_errors.inc()
        self.reason = f"{type(exc).__name__}: {exc}"
        if self.connected or self._next_attempt_s == 0.0:
            message = "shared cache %s unavailable (%s); serving without it, retrying every <= %.1f s"
            log.warning(message, redact_url(self.url), self.reason, self.retry_max_s)
            self._next_attempt_s = time.monotonic() + self._retry_s
        self.connected = False
        self.metrics.cache_up.set(0)

    async def connect(self) -> None:
        """Ping once at start-up; a failure only means the service starts without the cache."""
        self._next_attempt_s = 0.0
        try:
            await self._redis().ping()
        except (RedisError, OSError) as exc:
            self._down(exc)
        else:
            self._up()

    async def get_many(self, texts: Sequence[str]) -> list[CachedEmbedding | None] | None:
        """Entries for texts (None where absent), or None when Redis is unavailable."""
        if not texts or not self._may_try():
            return None
        try:
            raws = await self._redis().mget([cache_key(self.namespace, text) for text in texts])
        except (RedisError, OSError) as exc:
            self._down(exc)
            return None
        self._up()
        return [decode_entry(raw, self.dimension) if isinstance(raw, bytes) else None for raw in raws]

    async def put_many(self, entries: Sequence[tuple[str, np.ndarray, int]]) -> None:
        if not entries or not self.connected:
            return
        try:
            async with self._redis().pipeline(transaction=False) as pipe:
                for text, vector, tokens in entries:
                    key = cache_key(self.namespace, text)
                    pipe.set(key, encode_entry(vector, tokens), ex=self.ttl_s or None)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self._down(exc)

    async def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._client.aclose()
            self._client = None

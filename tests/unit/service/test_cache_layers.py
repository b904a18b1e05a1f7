"""Shared-cache keys and values, and the X-Cache verdict of a multi-input request."""

from __future__ import annotations

import numpy as np

from service.cache import CachedEmbedding, CacheLookup, cache_key, decode_entry, encode_entry
from service.settings import ServiceSettings, redact_url

ENTRY = CachedEmbedding(np.zeros(2, dtype=np.float32), 3)


def test_keys_differ_by_namespace_and_text_but_not_by_unicode_composition() -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert cache_key("embedperf:m:fp32", composed) == cache_key("embedperf:m:fp32", decomposed)
    assert cache_key("embedperf:m:fp32", "Cafe") != cache_key("embedperf:m:fp32", "cafe")
    assert cache_key("embedperf:m:fp32", "a") != cache_key("embedperf:m:int8", "a")
    assert cache_key("embedperf:m:fp32", "a").startswith("embedperf:m:fp32:")


def test_entries_round_trip_and_a_wrong_sized_value_is_a_miss() -> None:
    vector = np.array([0.25, -1.5, 3.0], dtype=np.float32)
    raw = encode_entry(vector, 17)
    entry = decode_entry(raw, 3)
    assert entry is not None and entry.tokens == 17 and entry.vector.tolist() == vector.tolist()
    assert decode_entry(raw, 4) is None


def test_x_cache_is_hit_only_when_every_input_hit() -> None:
    assert CacheLookup([ENTRY, ENTRY]).header() == "hit"
    assert CacheLookup([ENTRY, None]).header() == "partial"
    assert CacheLookup([None, None]).header() == "miss"
    assert CacheLookup([ENTRY, None], shared_down=True).header() == "bypass"
    assert CacheLookup([ENTRY], shared_down=True).header() == "hit"
    assert CacheLookup([None, ENTRY, None]).missing == [0, 2]


def test_the_cache_password_never_reaches_info() -> None:
    assert redact_url("redis://:s3cret@cache:6379/1") == "redis://:***@cache:6379/1"
    assert redact_url("redis://user:s3cret@cache:6379/1") == "redis://user:***@cache:6379/1"
    assert redact_url("redis://cache:6379/1") == "redis://cache:6379/1"
    config = ServiceSettings(cache="redis://:s3cret@cache:6379/1").public_config()
    assert "s3cret" not in str(config)

"""Two reference services, fp32 and int8, sharing one Redis (`--cache redis://...`), seen from outside:
neither ever answers with the other's vectors, each still hits its own entries, and `--cache-ttl-s`
is the expiry of what a service writes.

Each answer's `X-Cache` header (miss / hit / partial / bypass) says where its vectors came from;
the entries and their expiry are read from Redis itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import NamedTuple

import httpx
import numpy as np
import pytest
import redis

from loadgen.processes.redis_proc import RedisServer
from loadgen.processes.service_proc import ServiceProcess
from tests.conftest import SERVICE_READY_TIMEOUT_S

MODEL = "all-MiniLM-L6-v2"
INT8_TTL_S = 60
DEFAULT_TTL_S = 86400  # the service's default --cache-ttl-s
FP32_FIRST = ["the fp32 service embeds this first", "a second text the fp32 service sees first"]
INT8_FIRST = ["the int8 service embeds this first", "a second text the int8 service sees first"]
SAME_VECTOR_COSINE = 0.99999  # above this two answers are the same vector (float32 round-off aside)


class Services(NamedTuple):
    redis_url: str
    fp32: str  # the services' base URLs
    int8: str


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """Redis, then both services at once (their model loads overlap): fp32 with the default expiry,
    int8 (every Linear layer quantised) with --cache-ttl-s INT8_TTL_S."""
    tmp = tmp_path_factory.mktemp("redis-namespaces")
    with RedisServer(tmp / "redis") as store, ExitStack() as stack:
        common = ["--cache", store.url, "--no-warmup"]
        fp32 = ServiceProcess([*common, "--precision", "fp32"], log_path=tmp / "fp32.log",
                              ready_timeout_s=SERVICE_READY_TIMEOUT_S)  # fmt: skip
        int8 = ServiceProcess([*common, "--precision", "int8", "--cache-ttl-s", str(INT8_TTL_S)],
                              log_path=tmp / "int8.log", ready_timeout_s=SERVICE_READY_TIMEOUT_S)  # fmt: skip
        with ThreadPoolExecutor(2) as pool:
            started = list(pool.map(stack.enter_context, [fp32, int8]))
        yield Services(store.url, started[0].url, started[1].url)


def embed(url: str, texts: list[str]) -> tuple[str, np.ndarray]:
    """(X-Cache, the answer's vectors) for one request."""
    response = httpx.post(f"{url}/v1/embeddings", json={"model": MODEL, "input": texts}, timeout=60)
    assert response.status_code == 200, response.text
    return response.headers["x-cache"], np.array([row["embedding"] for row in response.json()["data"]])


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize(("first", "texts"), [("fp32", FP32_FIRST), ("int8", INT8_FIRST)])
def test_neither_service_answers_with_the_others_vectors(
    services: Services, first: str, texts: list[str]
) -> None:
    second = "int8" if first == "fp32" else "fp32"
    url = {"fp32": services.fp32, "int8": services.int8}
    cache_first, vectors_first = embed(url[first], texts)
    cache_second, vectors_second = embed(url[second], texts)  # the texts are in Redis now, under `first`
    assert (cache_first, cache_second) == ("miss", "miss")  # computed by each, never read across
    assert (cosines(vectors_first, vectors_second) < SAME_VECTOR_COSINE).all()  # int8's vectors differ
    for name, computed in ((first, vectors_first), (second, vectors_second)):
        again, cached = embed(url[name], texts)
        assert again == "hit"  # each service does use the shared cache for its own entries
        assert np.array_equal(cached, computed)  # exactly what the service itself computed


def test_cache_ttl_s_is_the_expiry_of_what_a_service_writes(services: Services) -> None:
    embed(services.fp32, ["an expiry check for fp32"])
    embed(services.int8, ["an expiry check for int8"])
    store = redis.Redis.from_url(services.redis_url)
    try:
        keys = [k.decode() for k in store.scan_iter("embedperf:*")]  # embedperf:<model>:<precision>:<digest>
        ttls = {k: store.ttl(k) for k in keys}
    finally:
        store.close()
    namespaces = {k.rsplit(":", 1)[0] for k in keys}
    assert len(namespaces) == 2 and {n.rsplit(":", 1)[1] for n in namespaces} == {"fp32", "int8"}, namespaces
    fp32_ttls = [t for k, t in ttls.items() if ":fp32:" in k]
    int8_ttls = [t for k, t in ttls.items() if ":int8:" in k]
    assert fp32_ttls and all(INT8_TTL_S < t <= DEFAULT_TTL_S for t in fp32_ttls), fp32_ttls
    assert int8_ttls and all(0 < t <= INT8_TTL_S for t in int8_ttls), int8_ttls

"""Scale-out and the shared cache on the real model: two CPU workers, Redis hit/miss/outage/recovery, busy port."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from loadgen.processes.redis_proc import RedisServer
from modelcore.model import EmbeddingModel, load_model
from service.local_app import create_app
from service.settings import ServiceSettings
from tests.conftest import REPO_ROOT

MODEL = "all-MiniLM-L6-v2"
RECOVERY_ATTEMPTS = 200
RECOVERY_PAUSE_S = 0.05


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model(threads=1)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    assert shutil.which("redis-server"), "redis-server missing: `make system-deps` installs it"
    with RedisServer(tmp_path / "redis") as server:
        yield server


@asynccontextmanager
async def serving(settings: ServiceSettings, model: EmbeddingModel) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, model)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service", timeout=60) as client:
            for _ in range(1200):
                if (await client.get("/ready")).status_code == 200:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("service never became ready")
            yield client


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def test_two_cpu_workers_both_compute_and_are_listed(minilm: EmbeddingModel) -> None:
    settings = ServiceSettings(workers=2, batching=False, warmup=False)

    async def go() -> None:
        async with serving(settings, minilm) as client:
            info = (await client.get("/info")).json()
            assert info["devices"] == [
                {"kind": "cpu", "index": 0, "name": "cpu:0"},
                {"kind": "cpu", "index": 1, "name": "cpu:1"},
            ]
            texts = [f"scale-out request number {i} about embeddings" for i in range(48)]
            responses = await asyncio.gather(
                *(client.post("/v1/embeddings", json={"model": MODEL, "input": text}) for text in texts)
            )
            assert [r.status_code for r in responses] == [200] * len(texts)
            text = (await client.get("/metrics")).text
            for device in ("cpu:0", "cpu:1"):
                assert metric(text, f'embedperf_device_busy_fraction{{device="{device}"}}') > 0
                assert metric(text, f'embedperf_device_batches_total{{device="{device}"}}') > 0
            batches = sum(
                metric(text, f'embedperf_device_batches_total{{device="{d}"}}') for d in ("cpu:0", "cpu:1")
            )
            assert batches == len(texts)  # batching off: one batch per request, each on one device
            device_s = sum(
                metric(text, f'embedperf_device_compute_seconds_total{{device="{d}"}}')
                for d in ("cpu:0", "cpu:1")
            )
            overall_s = metric(text, "embedperf_compute_seconds_total")
            assert (
                device_s / 2 <= overall_s < device_s
            )  # the overall rate is the mean over devices, not the sum
            health = (await client.get("/health")).json()
            assert set(health["device_busy_frac"]) == {"cpu:0", "cpu:1"} and 0 < health["busy_frac"] <= 1

    asyncio.run(asyncio.wait_for(go(), timeout=300))


def test_redis_cache_hits_misses_survives_an_outage_and_reconnects(
    minilm: EmbeddingModel, redis_server: RedisServer
) -> None:
    settings = ServiceSettings(cache=redis_server.url, cache_retry_max_s=0.2, warmup=False)

    async def embed(client: httpx.AsyncClient, texts: list[str]) -> tuple[str, list[list[float]]]:
        response = await client.post("/v1/embeddings", json={"model": MODEL, "input": texts})
        assert response.status_code == 200, response.text
        return response.headers["x-cache"], [row["embedding"] for row in response.json()["data"]]

    async def go() -> None:
        async with serving(settings, minilm) as client:
            assert (await client.get("/health")).json()["cache"]["connected"] is True
            first, computed = await embed(client, ["shared cache one", "shared cache two"])
            again, cached = await embed(client, ["shared cache one", "shared cache two"])
            mixed, _ = await embed(client, ["shared cache one", "shared cache three"])
            assert (first, again, mixed) == ("miss", "hit", "partial")
            assert cached == computed  # the cache returns exactly what the model computed
            text = (await client.get("/metrics")).text
            assert metric(text, "embedperf_cache_hits_total") == 3  # 2 + 1 inputs
            assert metric(text, "embedperf_cache_misses_total") == 3  # 2 + 1 inputs
            assert metric(text, "embedperf_cache_up") == 1

            redis_server.stop()  # SIGKILL: Redis is gone mid-run
            during, vectors = await embed(client, ["shared cache one", "outage input"])
            assert during == "bypass" and vectors[0] == computed[0]
            health = (await client.get("/health")).json()
            assert health["cache"]["connected"] is False and health["cache"]["reason"]
            text = (await client.get("/metrics")).text
            assert (
                metric(text, "embedperf_cache_up") == 0 and metric(text, "embedperf_cache_errors_total") >= 1
            )

            redis_server.start()  # back on the same port, empty
            verdicts = []
            for _ in range(RECOVERY_ATTEMPTS):
                verdict, _ = await embed(client, ["after recovery"])
                verdicts.append(verdict)
                if verdict != "bypass":
                    break
                await asyncio.sleep(RECOVERY_PAUSE_S)
            assert verdicts[-1] == "miss", verdicts
            assert (await embed(client, ["after recovery"]))[0] == "hit"
            assert (await client.get("/health")).json()["cache"]["connected"] is True

    asyncio.run(asyncio.wait_for(go(), timeout=300))


def test_the_service_starts_without_redis_and_says_so(minilm: EmbeddingModel, tmp_path: Path) -> None:
    dead = RedisServer(tmp_path / "never-started")  # a free port nobody listens on
    settings = ServiceSettings(cache=dead.url, warmup=False)

    async def go() -> None:
        async with serving(settings, minilm) as client:
            response = await client.post("/v1/embeddings", json={"model": MODEL, "input": "no cache today"})
            assert response.status_code == 200 and response.headers["x-cache"] == "bypass"
            cache = (await client.get("/health")).json()["cache"]
            assert cache["connected"] is False and "Connection" in cache["reason"]

    asyncio.run(asyncio.wait_for(go(), timeout=300))


def test_serve_on_a_busy_port_exits_2_before_loading_the_model() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "service", "--port", str(port)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"embedperf serve: error: port {port} on 127.0.0.1 is in use; pass --port N"]
    assert "loaded" not in proc.stdout + proc.stderr

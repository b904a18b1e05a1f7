"""The service as a process (python -m service / uvicorn): openai client, fidelity, int8, shutdown, devices."""

from __future__ import annotations

import concurrent.futures
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from modelcore.model import EmbeddingModel, load_model
from modelcore.model_folder import default_model_path
from tests.conftest import REPO_ROOT, start_service, stop_process

POLL_S = 0.02
MODEL = "all-MiniLM-L6-v2"
SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "深度学习模型在昇腾NPU上的推理性能测试",
    "Embedding services batch requests to keep the accelerator busy.",
    "今天天气很好，我们去公园散步吧。",
    "Capacity planning needs the P99 latency at every load step.",
    "向量检索系统依赖高质量的文本嵌入。",
]


def test_openai_client_against_the_running_service(reference_service: str) -> None:
    client = openai.OpenAI(base_url=f"{reference_service}/v1", api_key="unused", max_retries=0, timeout=30)
    response = client.embeddings.create(model="all-MiniLM-L6-v2", input=["hello world", "你好，世界"])
    assert len(response.data) == 2 and len(response.data[0].embedding) == 384
    assert response.usage.prompt_tokens > 0 and response.model == "all-MiniLM-L6-v2"
    floats = client.embeddings.create(model="all-MiniLM-L6-v2", input="hello world", encoding_format="float")
    assert np.allclose(floats.data[0].embedding, response.data[0].embedding, atol=1e-5)
    short = client.embeddings.create(model="all-MiniLM-L6-v2", input="hello world", dimensions=128)
    assert len(short.data[0].embedding) == 128
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="all-MiniLM-L6-v2", input="")


def test_embeddings_agree_with_sentence_transformers() -> None:
    from sentence_transformers import SentenceTransformer

    path = default_model_path()
    ours = load_model(path).encode(SENTENCES, batch_size=4)
    reference = SentenceTransformer(str(path), device="cpu").encode(SENTENCES, normalize_embeddings=True)
    cosines = np.sum(ours * reference, axis=1) / np.linalg.norm(reference, axis=1)
    assert ours.dtype == np.float32 and ours.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert cosines.min() >= 0.999, cosines


def test_int8_is_close_to_fp32_but_not_identical() -> None:
    fp32: EmbeddingModel = load_model()
    int8 = load_model(precision="int8")
    cosines = np.sum(fp32.encode(SENTENCES) * int8.encode(SENTENCES), axis=1)
    assert cosines.max() < 0.9999, cosines
    assert cosines.mean() > 0.95, cosines


def sigterm_with_requests_in_flight(
    tmp_path: Path, grace_s: float, requests: int, inputs: int
) -> tuple[list[tuple[int, float]], float, float]:
    """Start the service, send `requests` requests of `inputs` long inputs, SIGTERM it once they are all in
    flight: ([(status, t_done_s)], t_sigterm_s, t_exit_s). Status 0: the connection was cut."""
    flags = [
        "--max-batch-size",
        "8",
        "--no-warmup",
        "--deadline-ms",
        "120000",
        "--shutdown-grace-s",
        str(grace_s),
    ]
    proc, url = start_service(flags, tmp_path / "svc.log")
    long_inputs = ["request {i} " + "shutdown drains accepted work " * 60 for _ in range(inputs)]
    try:

        def post(i: int) -> tuple[int, float]:
            body = {"model": MODEL, "input": [text.format(i=i) for text in long_inputs]}
            try:
                status = httpx.post(f"{url}/v1/embeddings", json=body, timeout=120).status_code
            except httpx.HTTPError:
                status = 0
            return status, time.monotonic()

        with concurrent.futures.ThreadPoolExecutor(max_workers=requests) as pool, httpx.Client() as poll:
            futures = [pool.submit(post, i) for i in range(requests)]
            inflight = 0.0
            while inflight < requests and not any(f.done() for f in futures):
                time.sleep(POLL_S)  # a poll, not a spin: the service computes on the same cores
                metrics = poll.get(f"{url}/metrics", timeout=10).text
                inflight = float(re.search(r"^embedperf_inflight_requests (\S+)$", metrics, re.M).group(1))  # type: ignore[union-attr]
            assert inflight == requests  # every request was in flight when the signal came
            t_sigterm_s = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            outcomes = [f.result(timeout=120) for f in futures]
        assert proc.wait(timeout=120) == 0
        t_exit_s = time.monotonic()
        assert "HTTP server stopped" in (tmp_path / "svc.log").read_text()
        return outcomes, t_sigterm_s, t_exit_s
    finally:
        stop_process(proc)


def test_graceful_shutdown_finishes_requests_in_flight(tmp_path: Path) -> None:
    # four requests of one batch each (--max-batch-size 8): one computing and three queued at the signal
    outcomes, t_sigterm_s, _ = sigterm_with_requests_in_flight(tmp_path, grace_s=120, requests=4, inputs=8)
    assert [status for status, _ in outcomes] == [200] * 4
    assert any(t_done_s > t_sigterm_s for _, t_done_s in outcomes)  # and were finished after it


def test_the_shutdown_grace_cuts_off_work_that_would_outlast_it(tmp_path: Path) -> None:
    """Twelve requests of 8,192 tokens each take far longer than a 1 s grace on any CPU: the process exits
    once the grace has passed, long before their 120 s deadline, instead of waiting for them, and the requests
    it could not finish are answered a JSON 503 `shutting_down` (never a plain-text 500)."""
    outcomes, t_sigterm_s, t_exit_s = sigterm_with_requests_in_flight(
        tmp_path, grace_s=1, requests=12, inputs=32
    )
    statuses = [status for status, _ in outcomes]
    assert statuses.count(200) < 12, statuses
    assert t_exit_s - t_sigterm_s < 120 / 4
    assert 500 not in statuses, statuses
    cut_off = [
        json.loads(line)
        for line in (tmp_path / "svc.log").read_text().splitlines()
        if '"shutting_down"' in line
    ]
    assert len(cut_off) == statuses.count(503) > 0 and {line["status"] for line in cut_off} == {503}


def test_huge_bodies_get_413_and_the_service_keeps_serving(reference_service: str) -> None:
    huge = b'{"input": "' + b"x" * (10 * 1024 * 1024) + b'"}'

    def chunked() -> Iterator[bytes]:
        for start in range(0, len(huge), 1024 * 1024):
            yield huge[start : start + 1024 * 1024]

    def post(content: bytes | Iterator[bytes]) -> int:
        headers = {"content-type": "application/json"}
        return httpx.post(
            f"{reference_service}/v1/embeddings", content=content, headers=headers, timeout=60
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for round_index in range(5):
            bodies = [huge] * 4 if round_index % 2 == 0 else [chunked() for _ in range(4)]
            assert list(pool.map(post, bodies)) == [413] * 4, round_index
    ok = httpx.post(
        f"{reference_service}/v1/embeddings", json={"model": MODEL, "input": "still serving"}, timeout=30
    )
    assert ok.status_code == 200


def test_missing_npu_runtime_exits_with_install_hint() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "service", "--device", "npu", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 2
    assert "pip install 'embedperf[npu]'" in result.stderr and "set_env.sh" in result.stderr
    assert "Traceback" not in result.stderr


def test_clients_that_give_up_are_not_computed(reference_service: str) -> None:
    def metric(text: str, name: str) -> float:
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(match.group(1)) if match else 0.0

    before = httpx.get(f"{reference_service}/metrics", timeout=30).text
    texts = [f"input {i} " + "clients that gave up cost nothing " * 10 for i in range(64)]  # ~4k tokens

    def give_up(i: int) -> str:
        try:
            httpx.post(
                f"{reference_service}/v1/embeddings",
                json={"model": MODEL, "input": [f"{i}{t}" for t in texts]},
                timeout=0.5,
            )
        except httpx.TimeoutException:
            return "gave up"
        return "answered"

    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(give_up, range(10)))
    assert "gave up" in outcomes
    for _ in range(600):  # the service notices the disconnects and empties its queue
        if httpx.get(f"{reference_service}/health", timeout=30).json()["queue_depth"] == 0:
            break
        time.sleep(0.1)
    after = httpx.get(f"{reference_service}/metrics", timeout=30).text
    computed = metric(after, "embedperf_inputs_total") - metric(before, "embedperf_inputs_total")
    abandoned = metric(after, 'embedperf_abandoned_total{reason="disconnected"}') - metric(
        before, 'embedperf_abandoned_total{reason="disconnected"}'
    )  # seen by the service's HTTP protocol as the connection dropped
    assert abandoned >= 1 and computed < 10 * 64
    ok = httpx.post(
        f"{reference_service}/v1/embeddings", json={"model": MODEL, "input": "still serving"}, timeout=30
    )
    assert ok.status_code == 200

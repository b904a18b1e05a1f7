"""The service as a process (python -m service / uvicorn): openai client, fidelity, int8, shutdown, devices."""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from service.model import EmbeddingModel, default_model_path, load_model
from tests.conftest import REPO_ROOT, start_service, stop_process

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


def test_graceful_shutdown_finishes_accepted_work(tmp_path: Path) -> None:
    proc, url = start_service(
        ["--max-wait-ms", "1500", "--max-batch-size", "64", "--no-warmup"], tmp_path / "svc.log"
    )
    try:

        def post(i: int) -> int:
            return httpx.post(f"{url}/v1/embeddings", json={"input": f"request {i}"}, timeout=30).status_code

        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            futures = [pool.submit(post, i) for i in range(6)]
            time.sleep(0.6)  # accepted and waiting for the batch to fill
            proc.send_signal(signal.SIGTERM)
            codes = [f.result(timeout=30) for f in futures]
        assert codes == [200] * 6
        # uvicorn re-raises the captured SIGTERM after its graceful shutdown
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in (tmp_path / "svc.log").read_text()
    finally:
        stop_process(proc)


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

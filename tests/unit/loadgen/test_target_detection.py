"""What the pre-flight check makes of a target given only by its URL: the protocol (in a fixed order), the path
and the served model, from canned answers; and over HTTP, a model the target does not serve told apart from a
path it does not have."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from embedperf.errors import TargetError
from loadgen.lifecycle.preflight import check_target
from loadgen.lifecycle.target_detection import Prober, ResolvedTarget, resolve_target
from loadgen.traffic.protocols import registry
from loadgen.traffic.protocols.base import Probe
from scenarios.models import Scenario

VLLM_MODELS = {"object": "list", "data": [{"id": "team-embedder-v3", "object": "model", "owned_by": "vllm"}]}


def infinity_models(*ids: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": i, "owned_by": "infinity", "capabilities": ["embed"]} for i in ids],
    }


TEI_INFO = {
    "model_id": "BAAI/bge-m3",
    "model_type": {"embedding": {"pooling": "cls"}},
    "max_client_batch_size": 32,
}
TARGETS: dict[str, dict[str, Any]] = {
    "vllm": {"/v1/models": VLLM_MODELS},
    "infinity at /": {"/models": infinity_models("/models/minilm"), "/health": {"unix": 1.0}},
    "infinity under /v1": {"/v1/models": infinity_models("team-a", "team-b")},
    "tei": {"/info": TEI_INFO},
    "kserve": {"/v2": {"name": "kserve", "version": "0.14"}, "/v1/models": {"models": ["minilm"]}},
    "ollama": {"/api/tags": {"models": [{"name": "nomic-embed-text:latest"}]}},
    "reference service": {"/info": {"model": "all-MiniLM-L6-v2", "dimension": 384}},
    "other openai": {"/v1/models": {"data": [{"id": "text-embedding-3-small", "owned_by": "system"}]}},
    "nothing": {},
    # more than one protocol's paths answer: the registry's order decides
    "tei with a model list": {"/info": TEI_INFO, "/v1/models": VLLM_MODELS},
    "kserve with its v1 list": {"/v2": {"name": "triton", "version": "2.4"}, "/v1/models": {"models": ["x"]}},
}
EXPECTED = {  # protocol, path, model
    "vllm": ("vllm", "/v1/embeddings", "team-embedder-v3"),
    "infinity at /": ("infinity", "/embeddings", "/models/minilm"),
    "infinity under /v1": ("infinity", "/v1/embeddings", "team-a"),
    "tei": ("tei", "/embed", "BAAI/bge-m3"),
    "kserve": ("kserve-v2", "/v2/models/minilm/infer", "minilm"),
    "ollama": ("ollama", "/api/embed", "nomic-embed-text:latest"),
    "reference service": ("openai", "/v1/embeddings", "all-MiniLM-L6-v2"),
    "other openai": ("openai", "/v1/embeddings", "text-embedding-3-small"),
    "nothing": ("openai", "/v1/embeddings", "all-MiniLM-L6-v2"),
    "tei with a model list": ("tei", "/embed", "BAAI/bge-m3"),
    "kserve with its v1 list": ("kserve-v2", "/v2/models/x/infer", "x"),
}


def canned(answers: dict[str, Any]) -> Callable[[str], Probe]:
    asked: list[str] = []

    def fetch(path: str) -> Probe:
        asked.append(path)
        return Probe(200, answers[path]) if path in answers else Probe(404, {"detail": "Not Found"})

    fetch.asked = asked  # type: ignore[attr-defined]
    return fetch


def scenario(task: str = "embed", **target: object) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "t",
            "kind": "ramp",
            "steps": [{"users": 1, "duration_s": 1}],
            "target": target,
            "payload": {"task": task},
        }
    )


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_detection_picks_protocol_path_and_served_model(name: str) -> None:
    resolved = resolve_target(scenario(), canned(TARGETS[name]))
    assert (resolved.target.protocol, resolved.target.path, resolved.target.model) == EXPECTED[name]
    assert resolved.line.startswith(
        f"target: {EXPECTED[name][0]} ({resolved.protocol.label}) at {EXPECTED[name][1]}"
    )
    assert "--protocol/--model to set" in resolved.line and "\n" not in resolved.line


def test_the_line_says_what_gave_the_protocol_away() -> None:
    assert "(detected from GET /models;" in resolve_target(scenario(), canned(TARGETS["infinity at /"])).line
    assert "no protocol detected: the default" in resolve_target(scenario(), canned({})).line


def test_detection_asks_in_the_registry_order() -> None:
    fetch = canned({})
    resolve_target(scenario(), fetch)
    asked: list[str] = list(dict.fromkeys(fetch.asked))  # type: ignore[attr-defined]
    assert asked == [
        "/v2",
        "/info",
        "/api/tags",
        "/v1/models",
        "/models",
    ]  # kserve, tei, ollama, openai family
    assert [p.name for p in registry.BUILTIN] == ["kserve-v2", "tei", "ollama", "vllm", "infinity", "openai"]


def test_the_prober_asks_each_path_once(vllm_like: Callable[..., str]) -> None:
    url = vllm_like()
    prober = Prober(url, {})
    assert prober("/v1/models") == prober("/v1/models") == Probe(200, VLLM_MODELS)
    assert prober("/nope").status == 404 and list(prober.answers) == ["/v1/models", "/nope"]


def test_what_the_user_gives_wins_over_what_is_detected() -> None:
    given = resolve_target(scenario(model="team-b"), canned(TARGETS["infinity under /v1"]))
    assert (given.target.protocol, given.target.model) == ("infinity", "team-b")
    assert given.served_models == ("team-a", "team-b")
    as_given = resolve_target(scenario(protocol="infinity"), canned(TARGETS["infinity under /v1"]))
    assert (as_given.target.path, as_given.target.model) == ("/v1/embeddings", "team-a")
    assert "(as given, its API found by GET /v1/models;" in as_given.line
    fetch = canned(TARGETS["vllm"])
    everything = resolve_target(scenario(protocol="vllm", path="/v1/embeddings", model="m"), fetch)
    assert everything.line == "" and fetch.asked == []  # type: ignore[attr-defined]


def test_the_task_picks_the_path_and_a_protocol_without_it_is_refused() -> None:
    assert resolve_target(scenario("rerank"), canned(TARGETS["tei"])).target.path == "/rerank"
    assert resolve_target(scenario("embed_sparse"), canned(TARGETS["tei"])).target.path == "/embed_sparse"
    assert resolve_target(scenario("rerank"), canned(TARGETS["reference service"])).target.path == "/rerank"
    with pytest.raises(TargetError) as info:
        resolve_target(scenario("rerank"), canned(TARGETS["kserve"]))
    assert "protocol kserve-v2 has no rerank requests" in str(info.value)
    assert "detected from GET /v2" in str(info.value)


# --- over HTTP: a vLLM-style server that serves one model under a name embedperf is not told ---------------
SERVED = "team-embedder-v3"
EMBEDDING = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]}


class _Vllm(BaseHTTPRequestHandler):
    models: dict[str, Any] | None = VLLM_MODELS

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/v1/models" and self.models is not None:
            self._send(200, self.models)
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if self.path != "/v1/embeddings":
            self._send(404, {"detail": "Not Found"})
        elif body.get("model") != SERVED:
            message = f"The model `{body.get('model')}` does not exist."
            self._send(404, {"error": {"message": message, "type": "NotFoundError", "code": 404}})
        else:
            self._send(200, EMBEDDING)

    def _send(self, status: int, doc: Any) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def vllm_like() -> Iterator[Callable[..., str]]:
    servers: list[ThreadingHTTPServer] = []

    def start(models: dict[str, Any] | None = VLLM_MODELS) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Vllm,), {"models": models}))
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_with_nothing_given_the_served_model_is_used(vllm_like: Callable[..., str]) -> None:
    url = vllm_like()
    checked: ResolvedTarget = check_target(scenario(), url)
    assert (checked.base_url, checked.target.path, checked.target.model) == (url, "/v1/embeddings", SERVED)
    assert checked.overrides() == {
        "target.protocol": '"vllm"',
        "target.path": '"/v1/embeddings"',
        "target.model": f'"{SERVED}"',
    }


@pytest.mark.parametrize("given", [{}, {"protocol": "openai", "path": "/v1/embeddings"}])
def test_a_model_not_served_is_named_with_what_is_served(
    vllm_like: Callable[..., str], given: dict[str, str]
) -> None:
    with pytest.raises(TargetError) as info:
        check_target(scenario(model="all-MiniLM-L6-v2", **given), vllm_like())
    message = str(info.value)
    assert message.startswith(
        f"model all-MiniLM-L6-v2 is not served here; it serves: {SERVED} (HTTP 404 from"
    )
    assert "wrong path" not in message and info.value.exit_code == 2


def test_a_missing_path_is_still_a_wrong_path(vllm_like: Callable[..., str]) -> None:
    with pytest.raises(TargetError) as info:
        check_target(scenario(model=SERVED, path="/embeddings"), vllm_like())
    assert "404 Not Found: wrong path for protocol vllm" in str(info.value)
    assert "is not served here" not in str(info.value)


def test_a_model_not_found_without_a_model_list_says_so(vllm_like: Callable[..., str]) -> None:
    with pytest.raises(TargetError) as info:
        check_target(scenario(model="nope"), vllm_like(models=None))
    assert str(info.value).startswith("model nope is not served here (HTTP 404 from")
    assert "pass --model with a model the target serves" in str(info.value)


def test_kserve_without_a_model_says_one_is_needed() -> None:
    """A Triton server lists no models over GET: without --model there is no request path to send to."""
    with pytest.raises(TargetError, match=r"kserve-v2 needs a model: .*/v2/models/\{model\}/infer.*--model NAME"):
        resolve_target(scenario(protocol="kserve-v2"), canned({"/v2": {"name": "triton", "version": "2.4"}}))
    given = resolve_target(scenario(protocol="kserve-v2", model="minilm"), canned({}))
    assert given.target.path == "/v2/models/minilm/infer"


def test_connection_refused_names_the_target_not_the_probe() -> None:
    import socket

    with socket.socket() as sock:  # bound, never listening
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(TargetError) as info:
            Prober(base, {})("/v1/models")
    assert f"cannot reach the target at {base}: connection refused" in str(info.value)
    assert "/v1/models" not in str(info.value)

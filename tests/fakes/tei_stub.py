"""A stub of Hugging Face text-embeddings-inference (TEI): TEI's HTTP API with made-up vectors. It is not TEI.

TEI's server is not on the package registries, so the tests drive this stub instead. It follows TEI v1.9.3
(tag commit 06670157, github.com/huggingface/text-embeddings-inference) as its source publishes the API:
router/src/http/server.rs (routes, status codes, API key), router/src/http/types.rs (request and response
shapes), router/src/lib.rs (Info, ErrorResponse, the timing headers), core/src/infer.rs and
core/src/tokenization.rs (validation messages, rerank scores), router/src/prometheus.rs and docs/openapi.json.

    POST /embed         {"inputs": str | [str], "truncate": bool|null, "normalize": true, "dimensions": int|null}
                        -> [[float, ...], ...]   one vector per input, even for a single string
    POST /embed_sparse  {"inputs": ..., "truncate": ...} -> [[{"index": int, "value": float}, ...], ...]
    POST /rerank        {"query": str, "texts": [str], "raw_scores": false, "return_text": false, "truncate": ...}
                        -> [{"index": int, "text": str (return_text only), "score": float}] by score, highest first
    GET  /info          model_id, model_type ({"embedding": {"pooling": ...}} | {"reranker": {...}}), limits, version
    GET  /health        200 and an empty body; 503 {"error": "unhealthy", "error_type": "Unhealthy"}
    GET  /metrics       Prometheus text under TEI's names (tests/fakes/tei_metrics.py)

A successful answer carries TEI's headers, every time a whole number of milliseconds: x-compute-type
("gpu+optimized", as TEI hard-codes it), x-compute-time and x-total-time (since the request arrived),
x-tokenization-time, x-queue-time and x-inference-time (per-input means), x-compute-characters, x-compute-tokens.
An error is {"error": message, "error_type": Unhealthy|Backend|Overloaded|Validation|Tokenizer|Empty} with
503, 424, 429, 422 (413 for Validation before TEI 1.9.0: `validation_status`), 422, 400. A body that is not the
request's JSON shape gets axum's plain-text rejection (415 wrong content type, 400 not JSON, 422 wrong shape,
413 over the payload limit); with an API key, a protected route answers 401 with an empty body.

As in TEI, one process serves one kind of model (`model_type`): an embedding model answers /embed, a SPLADE
model /embed_sparse, a reranker /rerank, and the others 424. The vectors, tokens and raw scores are made up
(tests/fakes/tei_model.py: 384-dimensional, fixed per text); a rerank's score is the sigmoid of its raw score,
as for TEI's single-label rerankers. The stub does not batch requests together: each is one batch, its
`delay_ms` spent as tokenisation, queue and inference in TIME_SHARES. Faults (`fault`) break answers on purpose.
Left out: token-id inputs (422 here), prompt_name, truncation_direction, the other routes (/predict,
/similarity, /tokenize, /embeddings, ...), cross-request batching, and TEI's separate metrics port.

In-process: `with running_tei_stub(TeiStubConfig(...)) as url:`; as a process:
`python -m tests.fakes.tei_stub --port P [--delay-ms MS] [--fault F] [--model-type T]`, or
`with tei_stub_process("--model-type", "reranker") as url:`, which starts it so and stops it by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import uvicorn
from pydantic import BaseModel, ConfigDict, Field

from loadgen.processes.child import stop_child
from loadgen.processes.stub_target import Receive, Scope, Send
from tests.fakes import tei_metrics as m
from tests.fakes.tei_model import DIMENSION, cut, dense_vector, rerank_logit, sparse_vector, text_tokens
from tests.fakes.tei_wire import (
    PLAIN_TEXT,
    Phases,
    Rejection,
    TeiError,
    embed_options,
    read_json_body,
    send_bytes,
    send_json,
    shape_error,
    status_of,
    timing_headers,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
TEI_VERSION = "1.9.3"
TIME_SHARES = {"tokenization": 0.1, "queue": 0.2, "inference": 0.7}  # of delay_ms
PROTECTED = frozenset({"/info", "/embed", "/embed_sparse", "/rerank"})  # /health and /metrics stay open

Fault = Literal["none", "malformed_rerank", "malformed_embed", "backend_error", "unhealthy"]
ModelType = Literal["embedding", "splade", "reranker"]


class TeiStubConfig(BaseModel):
    """What the stub serves and how; the defaults are TEI's (router/src/main.rs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_id: str = Field(default="sentence-transformers/all-MiniLM-L6-v2", description="/info model_id.")
    served_model_name: str | None = Field(
        default=None, description="/info served_model_name (default: model_id)."
    )
    model_type: ModelType = Field(
        default="embedding", description="Which of /embed, /embed_sparse, /rerank answer."
    )
    delay_ms: float = Field(default=0.0, ge=0, description="Time each request takes, split by TIME_SHARES.")
    fault: Fault = Field(
        default="none",
        description="malformed_rerank: the last rank repeats the first rank's index (one text has no score; "
        "with one text, no rank at all); malformed_embed: vectors one component short; backend_error: "
        "every inference answers 424; unhealthy: /health answers 503.",
    )
    max_client_batch_size: int = Field(
        default=32, ge=1, description="Most inputs (or rerank texts) per request."
    )
    max_concurrent_requests: int = Field(default=512, ge=1, description="Most inputs in flight; beyond, 429.")
    max_input_length: int = Field(
        default=512, ge=1, description="Most tokens per input (per pair for rerank)."
    )
    max_batch_tokens: int = Field(default=16384, ge=1, description="/info max_batch_tokens.")
    auto_truncate: bool = Field(
        default=True, description="Truncate over-long inputs when a request says nothing."
    )
    payload_limit_bytes: int = Field(
        default=2_000_000, ge=1, description="Largest request body; beyond, 413."
    )
    api_key: str | None = Field(
        default=None, description="When set, protected routes need 'Authorization: Bearer KEY'."
    )
    validation_status: Literal[413, 422] = Field(
        default=422, description="Status of a Validation error: 422 since TEI 1.9.0, 413 before."
    )


class TeiStub:
    """The ASGI app. Frameworks left out, as in stub_server.py, so that it answers load tests quickly."""

    def __init__(self, config: TeiStubConfig) -> None:
        self.config = config
        self.metrics = m.TeiMetrics(config.max_input_length)
        self.inflight_inputs = 0  # TEI's permits: one per input, max_concurrent_requests in all

    # ---- HTTP ---------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        routes = {"/health": "GET", "/metrics": "GET", "/info": "GET", **dict.fromkeys(ENDPOINTS, "POST")}
        if path not in routes:
            await send_bytes(send, 404, b"")
            return
        if method != routes[path] and not (
            method == "HEAD" and routes[path] == "GET"
        ):  # axum's get() takes HEAD
            await send_bytes(send, 405, b"", [(b"allow", routes[path].encode())])
            return
        if self.config.api_key is not None and path in PROTECTED and not self._authorised(scope):
            await send_bytes(send, 401, b"")
            return
        if path == "/health":
            await self._health(send)
        elif path == "/metrics":
            await send_bytes(send, 200, self.metrics.render().encode(), [PLAIN_TEXT])
        elif path == "/info":
            await send_json(send, 200, self.info())
        else:
            await self._endpoint(path, scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        expected = f"Bearer {self.config.api_key}".encode()
        return any(name == b"authorization" and value == expected for name, value in scope["headers"])

    async def _health(self, send: Send) -> None:
        if self.config.fault == "unhealthy":
            await send_json(send, 503, {"error": "unhealthy", "error_type": "Unhealthy"})
        else:
            await send_bytes(send, 200, b"")

    def info(self) -> dict[str, Any]:
        """TEI's Info (router/src/lib.rs)."""
        c = self.config
        model_type: dict[str, Any]
        if c.model_type == "reranker":
            model_type = {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
        else:
            model_type = {"embedding": {"pooling": "splade" if c.model_type == "splade" else "mean"}}
        return {
            "model_id": c.model_id,
            "model_sha": None,
            "model_dtype": "float32",
            "served_model_name": c.served_model_name or c.model_id,
            "model_type": model_type,
            "max_concurrent_requests": c.max_concurrent_requests,
            "max_input_length": c.max_input_length,
            "max_batch_tokens": c.max_batch_tokens,
            "max_batch_requests": None,
            "max_client_batch_size": c.max_client_batch_size,
            "auto_truncate": c.auto_truncate,
            "tokenization_workers": 1,
            "version": TEI_VERSION,
            "sha": None,
            "docker_label": None,
        }

    async def _endpoint(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        t_start_s = time.perf_counter()
        try:
            body = await read_json_body(scope, receive, self.config.payload_limit_bytes)
            answer, chars, tokens, phases = await ENDPOINTS[path](self, body)
        except Rejection as exc:
            await send_bytes(send, exc.status, exc.text.encode(), [PLAIN_TEXT])
            return
        except TeiError as exc:
            self.metrics.inc(m.REQUEST_FAILURE, err=exc.failure)
            await send_json(send, status_of(exc.error_type, self.config.validation_status), exc.body())
            return
        total_s = time.perf_counter() - t_start_s
        for name, seconds in zip(
            m.REQUEST_DURATIONS,
            (total_s, phases.tokenization_s, phases.queue_s, phases.inference_s),
            strict=True,
        ):
            self.metrics.observe(name, seconds)
        headers = timing_headers(total_s, phases, chars, tokens)
        await send_json(send, 200, answer, headers)

    # ---- inference ----------------------------------------------------------------------------------------

    async def _run(
        self, texts: list[str], counts: list[int], truncate: bool | None, per_input: tuple[str, ...]
    ) -> tuple[list[int], Phases]:
        """Take a permit per input (429 when out of them), tokenise (400 for an empty input, 422 for one over
        max_input_length unless truncated), then spend delay_ms as tokenisation, queue and inference, recording
        TEI's batch, queue and per-input figures on the way. Returns the tokens per input and the phases."""
        n = len(texts)
        if self.inflight_inputs + n > self.config.max_concurrent_requests:
            raise TeiError("Overloaded", "Model is overloaded", "overloaded")
        self.inflight_inputs += n
        try:
            if any(not text for text in texts):
                raise TeiError("Empty", "Input validation error: `inputs` cannot be empty", "tokenization")
            tokens = self._truncated(counts, truncate)
            delay_s = self.config.delay_ms / 1000
            phases = Phases()
            phases.tokenization_s = await _spend(delay_s * TIME_SHARES["tokenization"])
            for count in tokens:
                self.metrics.observe(m.INPUT_LENGTH, count)
            self.metrics.add_gauge(m.QUEUE_SIZE, n)
            try:
                phases.queue_s = await _spend(delay_s * TIME_SHARES["queue"])
            finally:
                self.metrics.add_gauge(m.QUEUE_SIZE, -n)
            self.metrics.observe(m.BATCH_NEXT_SIZE, n)
            self.metrics.observe(m.BATCH_NEXT_TOKENS, sum(tokens))
            if self.config.fault == "backend_error":
                raise TeiError(
                    "Backend", "Backend error: injected failure (fault backend_error)", "inference"
                )
            phases.inference_s = await _spend(delay_s * TIME_SHARES["inference"])
        finally:
            self.inflight_inputs -= n
        total_s = phases.tokenization_s + phases.queue_s + phases.inference_s
        for name, seconds in zip(
            per_input, (total_s, phases.tokenization_s, phases.queue_s, phases.inference_s), strict=True
        ):
            self.metrics.observe(name, seconds, times=n)
        return tokens, phases

    def _truncated(self, counts: list[int], truncate: bool | None) -> list[int]:
        """Each input's tokens after truncation, or the Validation error TEI's tokenizer raises."""
        if truncate is None:
            truncate = self.config.auto_truncate
        limit = self.config.max_input_length
        for count in counts:
            if count > limit and not truncate:
                raise TeiError(
                    "Validation",
                    f"Input validation error: `inputs` must have less than {limit} tokens. Given: {count}",
                    "tokenization",
                )
        return [min(count, limit) for count in counts]

    def _inputs(self, body: Any, method_counter: str) -> tuple[list[str], str]:
        """An embed request's inputs and its method (single | batch), counted as TEI counts them."""
        if not isinstance(body, dict) or "inputs" not in body:
            raise shape_error("missing field `inputs`")
        value = body["inputs"]
        # serde's untagged enum reads [] as one input of no token ids, so it is a "single" request
        single = isinstance(value, str) or value == []
        inputs = [value] if isinstance(value, str) else value
        if not isinstance(inputs, list) or not all(isinstance(text, str) for text in inputs):
            raise shape_error("data did not match any variant of untagged enum Input")
        method = "single" if single else "batch"
        self.metrics.inc(m.REQUEST_COUNT, method=method)
        if single and not inputs:
            raise TeiError("Empty", "Input validation error: `inputs` cannot be empty", "tokenization")
        if not single:
            if not inputs:
                raise TeiError("Empty", "`inputs` cannot be empty", "validation")
            self._check_batch_size(len(inputs))
        self.metrics.inc(method_counter, len(inputs))
        return inputs, method

    def _check_batch_size(self, size: int) -> None:
        if size > self.config.max_client_batch_size:
            raise TeiError(
                "Validation",
                f"batch size {size} > maximum allowed batch size {self.config.max_client_batch_size}",
                "batch_size",
            )

    def _require(self, model_type: ModelType, message: str) -> None:
        if self.config.model_type != model_type:
            raise TeiError("Backend", f"Backend error: {message}", "model_type")

    async def embed(self, body: Any) -> tuple[Any, int, int, Phases]:
        """POST /embed."""
        truncate, normalize, dimensions = embed_options(body, normalize=True, dimensions=True)
        inputs, method = self._inputs(body, m.EMBED_COUNT)
        if self.config.model_type == "reranker":
            raise TeiError("Backend", "Backend error: Model is not an embedding model", "model_type")
        if self.config.model_type == "splade" and normalize:
            raise TeiError(
                "Backend", "Backend error: `normalize` is not available for SPLADE models", "model_type"
            )
        if dimensions is not None and not 0 < dimensions <= DIMENSION:
            message = "`dimensions` should be positive"
            if dimensions > 0:
                message = "`dimensions` should be smaller than the maximum embedding dimension."
            raise TeiError("Validation", f"Input validation error: {message}", "validation")
        counts = [text_tokens(text) for text in inputs]
        tokens, phases = await self._run(inputs, counts, truncate, m.EMBED_DURATIONS)
        vectors = [dense_vector(text, normalize) for text in inputs]
        if dimensions is not None:
            vectors = [cut(v, dimensions, normalize) for v in vectors]
        if self.config.fault == "malformed_embed":
            vectors = [v[:-1] for v in vectors]
        self._succeeded(method, m.EMBED_SUCCESS, len(inputs))
        return vectors, sum(len(text) for text in inputs), sum(tokens), phases

    async def embed_sparse(self, body: Any) -> tuple[Any, int, int, Phases]:
        """POST /embed_sparse."""
        truncate, _, _ = embed_options(body, normalize=False, dimensions=False)
        inputs, method = self._inputs(body, m.EMBED_COUNT)
        self._require("splade", "Model is not an embedding model with SPLADE pooling")
        counts = [text_tokens(text) for text in inputs]
        tokens, phases = await self._run(inputs, counts, truncate, m.EMBED_DURATIONS)
        self._succeeded(method, m.EMBED_SUCCESS, len(inputs))
        return [sparse_vector(text) for text in inputs], sum(len(t) for t in inputs), sum(tokens), phases

    async def rerank(self, body: Any) -> tuple[Any, int, int, Phases]:
        """POST /rerank, in the order of TEI's handler: empty texts, model type, count, batch size."""
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            raise shape_error(
                "missing field `query`" if not isinstance(body, dict) or "query" not in body else "query"
            )
        texts = body.get("texts")
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise shape_error(
                "missing field `texts`" if "texts" not in body else "texts: expected a sequence of strings"
            )
        flags = {name: body.get(name, False) for name in ("raw_scores", "return_text")}
        truncate = body.get("truncate")
        if not all(isinstance(v, bool) for v in flags.values()) or not isinstance(truncate, bool | None):
            raise shape_error("raw_scores, return_text and truncate are booleans")
        if not texts:
            raise TeiError("Empty", "`texts` cannot be empty", "validation")
        self._require("reranker", "model is not a re-ranker model")
        self.metrics.inc(m.REQUEST_COUNT, method="batch")
        self._check_batch_size(len(texts))
        query = body["query"]
        self.metrics.inc(m.PREDICT_COUNT, len(texts))
        pairs = [text if query else "" for text in texts]  # a pair with an empty side is an empty input
        counts = [text_tokens(query) + text_tokens(text) - 1 for text in texts]  # [CLS] q [SEP] t [SEP]
        tokens, phases = await self._run(pairs, counts, truncate, m.PREDICT_DURATIONS)
        ranks: list[dict[str, Any]] = []
        for index, text in enumerate(texts):
            logit = rerank_logit(query, text)
            score = logit if flags["raw_scores"] else 1.0 / (1.0 + math.exp(-logit))
            ranks.append({"index": index, **({"text": text} if flags["return_text"] else {}), "score": score})
        ranks = sorted(ranks, key=lambda rank: rank["score"])[::-1]  # TEI: a stable ascending sort, reversed
        if self.config.fault == "malformed_rerank":
            ranks = [] if len(ranks) == 1 else [*ranks[:-1], {**ranks[-1], "index": ranks[0]["index"]}]
        self._succeeded("batch", m.PREDICT_SUCCESS, len(texts))
        chars = len(query) * len(texts) + sum(len(text) for text in texts)
        return ranks, chars, sum(tokens), phases

    def _succeeded(self, method: str, per_input_counter: str, n: int) -> None:
        self.metrics.inc(per_input_counter, n)
        self.metrics.inc(m.REQUEST_SUCCESS, method=method)


ENDPOINTS = {"/embed": TeiStub.embed, "/embed_sparse": TeiStub.embed_sparse, "/rerank": TeiStub.rerank}


async def _spend(seconds: float) -> float:
    """Sleep for `seconds` (none when 0); returns the time that really went by."""
    t_start_s = time.perf_counter()
    if seconds > 0:
        await asyncio.sleep(seconds)
    return time.perf_counter() - t_start_s


@contextmanager
def running_tei_stub(config: TeiStubConfig | None = None) -> Iterator[str]:
    """Serve the stub on 127.0.0.1 (a free port) in a thread for the duration of the block; yields its URL.

    The socket listens before the server starts, so a request sent at once waits in the backlog instead of
    being refused."""
    app = TeiStub(config or TeiStubConfig())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def tei_stub_process(*flags: str, ready_timeout_s: float = 30.0) -> Iterator[str]:
    """`python -m tests.fakes.tei_stub` on a free loopback port with these flags until the block ends; yields
    its URL once /health answers (any status: the unhealthy fault answers 503)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [sys.executable, "-m", "tests.fakes.tei_stub", "--port", str(port), *flags]
    proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline_s = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"the TEI stub exited with {proc.returncode}: {stderr[-2000:]}")
            try:
                httpx.get(f"{url}/health", timeout=1.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline_s:
                    raise RuntimeError(f"the TEI stub did not answer within {ready_timeout_s} s") from None
                time.sleep(0.05)
        yield url
    finally:
        stop_child(proc, 10.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.tei_stub", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    fields = TeiStubConfig.model_fields
    for name in (
        "model_id",
        "model_type",
        "delay_ms",
        "fault",
        "max_client_batch_size",
        "max_concurrent_requests",
        "max_input_length",
        "api_key",
        "validation_status",
    ):
        field = fields[name]
        kind = type(field.default) if field.default is not None else str
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=kind, default=field.default, help=field.description
        )
    args = vars(parser.parse_args(argv))
    host, port = args.pop("host"), args.pop("port")
    config = TeiStubConfig.model_validate(args)
    uvicorn.run(TeiStub(config), host=host, port=port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

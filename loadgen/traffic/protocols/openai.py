"""OpenAI-style embeddings (`POST /v1/embeddings`), the default protocol and the reference service's, and the
OpenAI-shaped servers with a Cohere-shaped rerank (vLLM, Infinity).

The default's rerank is the reference service's TEI-shaped `POST /rerank` (OpenAI has none). Float answers
are checked by a byte scan (count and length of the embedding lists) that costs a few microseconds where
parsing every float costs ~100 us at 384 dimensions; any answer the scan does not accept outright is parsed
with `json` for the exact reason."""

from __future__ import annotations

import base64
import re
from typing import Any

from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.base import (
    Checked,
    Detection,
    Expectations,
    Fetch,
    TargetProtocol,
    json_text,
    listed_model,
    model_ids,
    parse_json,
)
from loadgen.traffic.protocols.checks import check_dim, check_ranking, check_vectors, one_size
from scenarios.models import Target, Task

REFERENCE_MODEL = "all-MiniLM-L6-v2"  # the reference service's model, sent when nothing names another
_EMBEDDING_LIST = re.compile(rb'"embedding"\s*:\s*\[')  # `"object": "embedding"` does not match
_PROMPT_TOKENS = re.compile(rb'"prompt_tokens"\s*:\s*(\d+)\s*[,}]')


def count_float_lists(body: bytes, dim: int) -> int:
    """How many `"embedding": [...]` lists of `dim` numbers the body holds; -1 for anything else (then the
    caller parses it). A byte scan in C calls, without copies: it runs once per request."""
    if body[:1] != b"{" or body[-1:] != b"}":
        stripped = body.strip()
        if not (stripped.startswith(b"{") and stripped.endswith(b"}")):
            return -1
    if b'"data"' not in body:
        return -1
    search, find = _EMBEDDING_LIST.search, body.find
    count = pos = 0
    while (match := search(body, pos)) is not None:
        start = match.end()
        end = find(b"]", start)
        if end < 0 or find(b"[", start, end) >= 0:
            return -1
        # bytes a list of JSON numbers never holds: n (null, Infinity), N (NaN), " (a string)
        if find(b"n", start, end) >= 0 or find(b"N", start, end) >= 0 or find(b'"', start, end) >= 0:
            return -1
        items = body.count(b",", start, end) + 1
        if items == 1 and not body[start:end].strip():
            items = 0
        if items != dim:
            return -1
        count += 1
        pos = end + 1
    return count


def check_embeddings(body: bytes, n_inputs: int, encoding_format: str, expect: Expectations) -> Checked:
    """'' when the answer holds n_inputs good embeddings, else why; and the usage tokens."""
    dim = expect.expected_dim
    if dim is not None and encoding_format == "float" and count_float_lists(body, dim) == n_inputs:
        at = body.rfind(b'"prompt_tokens"')  # usage comes last: look there first
        match = _PROMPT_TOKENS.match(body, at) if at >= 0 else None
        if match is None and at >= 0:
            match = _PROMPT_TOKENS.search(body)
        return "", int(match.group(1)) if match else None
    return check_parsed(body, n_inputs, encoding_format, expect)


def check_parsed(body: bytes, n_inputs: int, encoding_format: str, expect: Expectations) -> Checked:
    """The exact reason an answer is wrong (or '' when the byte scan was only unsure), from the parsed JSON."""
    doc, error = parse_json(body)
    if error:
        return error, None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return "answer has no `data` list", None
    tokens = usage_tokens(doc)
    if encoding_format == "base64":
        return _check_base64(data, n_inputs, expect), tokens
    vectors = [item.get("embedding") if isinstance(item, dict) else None for item in data]
    return check_vectors(vectors, n_inputs, expect), tokens


def _check_base64(data: list[Any], n_inputs: int, expect: Expectations) -> str:
    if len(data) != n_inputs:
        return f"wrong count: {len(data)} embeddings for {n_inputs} inputs"
    dims: set[int | None] = set()
    for item in data:
        emb = item.get("embedding") if isinstance(item, dict) else None
        try:
            dims.add(len(base64.b64decode(emb, validate=True)) // 4 if isinstance(emb, str) else None)
        except ValueError:
            return "embedding is not valid base64"
    dim, error = one_size(dims)
    return error or check_dim(dim, expect)


def usage_tokens(doc: Any) -> int | None:
    """usage.prompt_tokens of an OpenAI-style answer (None when it reports none)."""
    usage = doc.get("usage") if isinstance(doc, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def check_tei_ranks(doc: Any, n_documents: int) -> str:
    """TEI's rerank answer: [{"index", "score"}], one per document."""
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        return "answer is not a list of {index, score} ranks"
    return check_ranking([(r.get("index"), r.get("score")) for r in doc], n_documents)


class OpenAIProtocol(TargetProtocol):
    """`{"input": [...], "model", "encoding_format"}` -> `{"data": [{"embedding": [...]}], "usage"}`."""

    name = "openai"
    label = "OpenAI-style embeddings"
    tasks = ("embed", "rerank")
    default_model = REFERENCE_MODEL
    default_prefix = "/v1"
    owner = ""  # a model list whose items say `owned_by` this is this protocol's (vllm, infinity)

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        return "/rerank" if task == "rerank" else f"{prefix}/embeddings"

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        if task == "rerank":
            model = {"model": target.model} if target.model else {}
            return json_text({"query": payload.query, "texts": payload.inputs, **model})
        return json_text({"input": payload.inputs, "model": target.model, "encoding_format": target.encoding_format})

    def check_answer(
        self, body: bytes, payload: RequestPayload, task: Task, target: Target, expect: Expectations
    ) -> Checked:
        if task == "rerank":
            return self.check_rerank(body, len(payload.inputs))
        return check_embeddings(body, len(payload.inputs), target.encoding_format, expect)

    def check_rerank(self, body: bytes, n_documents: int) -> Checked:
        """The reference service's TEI-shaped ranking."""
        doc, error = parse_json(body)
        return error or check_tei_ranks(doc, n_documents), None

    def detect(self, fetch: Fetch) -> Detection | None:
        """A model list at /v1/models or /models, else the reference service's /info (model, dimension)."""
        for prefix in ("/v1", ""):
            listing = fetch(f"{prefix}/models").doc
            items = listing.get("data")
            if not isinstance(items, list):
                continue
            if self.owner and not any(isinstance(i, dict) and i.get("owned_by") == self.owner for i in items):
                continue
            return Detection(self, prefix, tuple(model_ids(listing)), f"GET {prefix}/models")
        info = {} if self.owner else fetch("/info").doc
        model, dim = info.get("model"), info.get("dimension")
        if isinstance(model, str) and isinstance(dim, int):
            return Detection(self, self.default_prefix, (model,), "GET /info")
        return None

    def served_models(self, fetch: Fetch, prefix: str) -> list[str]:
        probe = fetch(f"{prefix}/models")
        if probe.ok:
            return model_ids(probe.body)
        model = fetch("/info").doc.get("model")
        return [model] if isinstance(model, str) else []


PROTOCOL = OpenAIProtocol()


class OpenAIServerProtocol(OpenAIProtocol):
    """OpenAI-shaped with its own model owner, metric names and Cohere-shaped rerank (vLLM, Infinity)."""

    default_model = ""

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        return f"{prefix}/rerank" if task == "rerank" else f"{prefix}/embeddings"

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        if task == "rerank":
            return json_text({"model": target.model, "query": payload.query, "documents": payload.inputs})
        return super().request_body(payload, task, target)

    def check_rerank(self, body: bytes, n_documents: int) -> Checked:
        """Cohere's rerank answer: {"results": [{"index", "relevance_score"}], "usage"}."""
        doc, error = parse_json(body)
        if error:
            return error, None
        results = doc.get("results") if isinstance(doc, dict) else None
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            return "answer has no `results` list of ranks", None
        usage = doc.get("usage")
        tokens = usage_tokens(doc)
        if tokens is None and isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
            tokens = usage["total_tokens"]
        ranks = [(r.get("index"), r.get("relevance_score")) for r in results]
        return check_ranking(ranks, n_documents), tokens

    def info_path(self, target: Target) -> str:
        return f"{target.path.rsplit('/', 1)[0]}/models"  # the model list beside the request path

    def service_info(self, raw: Any, model: str) -> dict[str, Any] | None:
        """The served model's entry of the model list, as {"model": id, ...its fields}."""
        info = listed_model(raw, model)
        return {k: v for k, v in info.items() if k != "id"} if info is not None else None


class VllmProtocol(OpenAIServerProtocol):
    """vLLM's OpenAI-compatible server (also vllm-ascend): embeddings and rerank under /v1, own metrics."""

    name = "vllm"
    label = "vLLM OpenAI-compatible"
    owner = "vllm"
    metric_names = {
        "queue_depth": "vllm:num_requests_waiting", "request_rate_qps": "vllm:request_success_total",
        "tokens_per_s": "vllm:prompt_tokens_total",
    }


class InfinityProtocol(OpenAIServerProtocol):
    """Infinity (`infinity_emb v2`): /embeddings and /rerank below its --url-prefix (none by default). Its
    /metrics holds HTTP-level figures only, no queue or batch: the collectors find nothing of ours."""

    name = "infinity"
    label = "infinity-style OpenAI"
    owner = "infinity"
    default_prefix = ""


VLLM = VllmProtocol()
INFINITY = InfinityProtocol()

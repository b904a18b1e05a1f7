"""The target-protocol interface: what the load side needs to know about one kind of server (its requests,
answers, timings, discovery paths and Prometheus names). Subclass TargetProtocol, override what differs and
register an instance (registry.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from loadgen.traffic.headers import raw_timing_values
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.quality import answer_vectors
from scenarios.models import Target, Task

HeaderGetter = Callable[[str], Any]  # a case-insensitive header getter (None when absent)
Checked = tuple[str, int | None]  # an answer's check: '' or why it is wrong, and the input tokens it reports
# A model-not-found answer, as vLLM ("The model `x` does not exist."), Infinity ("Engine for model name `x`
# not found. Available model names are [...]"), the reference service and Ollama ("model 'x' not found") word it.
_MODEL_NOT_FOUND = re.compile(
    r"model.{0,160}?(does not exist|not found|not served|is not available|unknown)|model_not_found|invalid model",
    re.IGNORECASE | re.DOTALL,
)
MODEL_NOT_FOUND_STATUSES = frozenset({400, 404, 422})


class Expectations(Protocol):
    """What an answer is checked against and what it teaches: the run context is one."""

    expected_dim: int | None
    dim_source: str

    def learn_dim(self, dim: int) -> None: ...


@dataclass(frozen=True)
class Probe:
    """One GET of the pre-flight detection: the status (0: no answer) and the body as JSON (None: not JSON)."""

    status: int
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.body is not None

    @property
    def doc(self) -> dict[str, Any]:
        """The JSON object of a good answer; {} for anything else."""
        return self.body if self.ok and isinstance(self.body, dict) else {}


Fetch = Callable[[str], Probe]  # path below the base URL -> its answer (the caller caches and bounds them)


@dataclass(frozen=True)
class Detection:
    """A protocol found on a target: its API prefix, the models it serves and the answer that showed it."""

    protocol: TargetProtocol
    prefix: str
    models: tuple[str, ...]
    evidence: str


class TargetProtocol:
    """One kind of server; override what differs (openai.py is the fullest example)."""

    name: str = ""
    label: str = ""  # how the pre-flight line names it, e.g. "infinity-style OpenAI"
    tasks: tuple[Task, ...] = ("embed",)
    health_path: str = "/health"
    # canonical service metric (queue_depth, batch_size_mean, request_rate_qps, tokens_per_s, busy_frac) ->
    # the server's own Prometheus name; the collectors' service source reads these from its /metrics
    metric_names: Mapping[str, str] = {}
    default_model: str = ""  # sent when neither the user nor the target names one
    model_in_path: bool = False  # the request path names the model: without one there is no path at all
    detect_path: str = ""  # where detect() looks: the JSON object there `shows` this protocol
    models_path: str = ""  # the model list below the API prefix: model_ids(doc, models_key, models_field)
    models_key: str = "data"
    models_field: str = "id"

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        """The request path of a task, below the base URL (prefix: where detection found the API)."""
        raise NotImplementedError

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        """The JSON text of one request."""
        raise NotImplementedError

    def check_answer(
        self, body: bytes, payload: RequestPayload, task: Task, target: Target, expect: Expectations
    ) -> Checked:
        """Check a 200 answer: by default check_doc's verdict on its JSON."""
        doc, error = parse_json(body)
        return (error, None) if error else self.check_doc(doc, payload, task, expect)

    def check_doc(self, doc: Any, payload: RequestPayload, task: Task, expect: Expectations) -> Checked:
        """check_answer of an answer that is JSON."""
        raise NotImplementedError

    def dense_vectors(self, body: bytes) -> list[np.ndarray] | None:
        """A good embeddings answer's vectors (None: unreadable); by default OpenAI's data[].embedding."""
        return answer_vectors(body)

    def raw_timing(self, get_header: HeaderGetter) -> list[Any]:
        """The row's timing tail as stored on the request path (loadgen.traffic.headers.parse_raw_timing)."""
        return raw_timing_values(get_header)

    def header_tokens(self, get_header: HeaderGetter) -> int | None:
        """Input tokens a server reports in a header rather than in the body."""
        return None

    def info_path(self, target: Target) -> str:
        """Where the target describes itself (recorded in the manifest), for the resolved target."""
        return "/info"

    def service_info(self, raw: Any, model: str) -> dict[str, Any] | None:
        """The description as the manifest's service_info (model, dimension, ...): by default the JSON object."""
        return raw if isinstance(raw, dict) else None

    def detect(self, fetch: Fetch) -> Detection | None:
        """This protocol if the target's GET answers show it: by default the JSON object at detect_path."""
        if not self.detect_path or not self.shows(fetch(self.detect_path).doc):
            return None
        return Detection(self, "", tuple(self.served_models(fetch, "")), f"GET {self.detect_path}")

    def shows(self, doc: dict[str, Any]) -> bool:
        """Whether the JSON object at detect_path ({} for any other answer) is this protocol's."""
        return False

    def served_models(self, fetch: Fetch, prefix: str) -> list[str]:
        """The model ids the target serves, from its model list or description ([] when it has none)."""
        if not self.models_path:
            return []
        return model_ids(fetch(prefix + self.models_path).doc, self.models_key, self.models_field)

    def model_not_found(self, status: int, body: bytes) -> bool:
        """Whether an error answer means "no such model" rather than "no such path"."""
        if status not in MODEL_NOT_FOUND_STATUSES or not body:
            return False
        return _MODEL_NOT_FOUND.search(body[:4000].decode("utf-8", errors="replace")) is not None

    def unsupported(self, task: Task) -> str:
        """'' when this protocol serves the task, else the one-line reason."""
        if task in self.tasks:
            return ""
        return f"protocol {self.name} has no {task} requests; it serves: {', '.join(self.tasks)}"


def json_text(doc: Any) -> str:
    """A request body: compact JSON, as every protocol sends it."""
    return json.dumps(doc)


def parse_json(body: bytes) -> tuple[Any, str]:
    """(document, '') or (None, the reason): an answer that is not JSON is a wrong answer, never a crash."""
    try:
        return json.loads(body), ""
    except ValueError:
        return None, "invalid JSON in a 200 answer"


def model_ids(doc: Any, key: str = "data", field: str = "id") -> list[str]:
    """The ids of a model list: {"data": [{"id": ...}]} (OpenAI) or {"models": [{"name": ...}]} (Ollama)."""
    return [str(item[field]) for item in _items(doc, key) if isinstance(item.get(field), str)]


def listed_model(doc: Any, model: str, key: str = "data", field: str = "id") -> dict[str, Any] | None:
    """The entry of `model` in a model list (as model_ids reads it) with its id as `model`."""
    return next(({**item, "model": model} for item in _items(doc, key) if item.get(field) == model), None)


def _items(doc: Any, key: str) -> list[dict[str, Any]]:
    items = doc.get(key) if isinstance(doc, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def vector_rows(rows: Any) -> list[np.ndarray] | None:
    """A JSON list of number lists as float vectors (None: not that shape), as TEI and Ollama answer."""
    if not isinstance(rows, list) or not rows or not all(isinstance(row, list) for row in rows):
        return None
    try:
        return [np.asarray(row, dtype=np.float64) for row in rows]
    except (TypeError, ValueError):
        return None

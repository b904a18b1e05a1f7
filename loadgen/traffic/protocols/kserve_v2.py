"""KServe v2 / Triton, the Open Inference Protocol: texts in as a BYTES tensor, embeddings out as FP32 [n, d].

    POST /v2/models/{model}/infer  {"inputs": [{"name": "text", "shape": [n], "datatype": "BYTES", "data": [...]}]}
                                   -> {"outputs": [{"name", "shape": [n, d], "datatype": "FP32", "data": [flat]}]}
    GET  /v2                       server metadata {"name", "version", "extensions"}
    GET  /v2/health/ready          readiness
    GET  /v2/models/{model}        model metadata {"name", "inputs", "outputs": [{"shape": [-1, d]}]}

The input tensor is INPUT_NAME ("text"), as such models commonly name it. Models are listed at KServe's
`GET /v1/models`; Triton lists none over GET: give --model. KServe's request_predict_seconds histogram
gives the collectors busy fraction and request rate."""

from __future__ import annotations

from typing import Any

import numpy as np

from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.base import Checked, Expectations, Fetch, TargetProtocol, json_text, parse_json
from loadgen.traffic.protocols.checks import check_flat
from scenarios.models import Target, Task

INPUT_NAME = "text"


class KServeV2Protocol(TargetProtocol):
    name = "kserve-v2"
    label = "KServe v2 / Triton (Open Inference Protocol)"
    tasks = ("embed",)
    health_path = "/v2/health/ready"
    detect_path = "/v2"
    model_in_path = True
    metric_names = {"busy_frac": "request_predict_seconds_sum", "request_rate_qps": "request_predict_seconds_count"}

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        return f"{prefix}/v2/models/{model}/infer"

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        inputs = payload.inputs
        tensor = {"name": INPUT_NAME, "shape": [len(inputs)], "datatype": "BYTES", "data": inputs}
        return json_text({"inputs": [tensor]})

    def check_doc(self, doc: Any, payload: RequestPayload, task: Task, expect: Expectations) -> Checked:
        output = first_output(doc)
        if output is None:
            return "answer has no `outputs` tensor", None
        if output.get("datatype") not in ("FP32", "FP16", "FP64", "BF16"):
            return f"output tensor of datatype {output.get('datatype')!r}, not floating point", None
        return check_flat(output.get("data"), output.get("shape"), len(payload.inputs), expect), None

    def dense_vectors(self, body: bytes) -> list[np.ndarray] | None:
        """The first output tensor, [inputs, dimension] row-major, as one vector per input."""
        doc, error = parse_json(body)
        output = None if error else first_output(doc)
        if output is None:
            return None
        shape, data = output.get("shape"), output.get("data")
        if not isinstance(shape, list) or len(shape) != 2 or not isinstance(data, list):
            return None
        try:
            return list(np.asarray(data, dtype=np.float64).reshape(int(shape[0]), int(shape[1])))
        except (TypeError, ValueError):
            return None

    def info_path(self, target: Target) -> str:
        return f"/v2/models/{target.model}"

    def service_info(self, raw: Any, model: str) -> dict[str, Any] | None:
        """Model metadata as the manifest's service_info: its name, and the dimension its output shape fixes."""
        if not isinstance(raw, dict):
            return None
        info: dict[str, Any] = {**raw, "model": raw.get("name") or model}
        shape = (first_output(raw) or {}).get("shape")
        if isinstance(shape, list) and shape and isinstance(shape[-1], int) and shape[-1] > 0:
            info["dimension"] = shape[-1]
        return info

    def shows(self, doc: dict[str, Any]) -> bool:
        """The server metadata at GET /v2 (name, version, extensions)."""
        return {"name", "version"} <= doc.keys()

    def served_models(self, fetch: Fetch, prefix: str) -> list[str]:
        names = fetch(f"{prefix}/v1/models").doc.get("models")
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def first_output(doc: Any) -> dict[str, Any] | None:
    """The first tensor of a JSON object's `outputs` (an answer, or model metadata), None without one."""
    outputs = doc.get("outputs") if isinstance(doc, dict) else None
    return outputs[0] if isinstance(outputs, list) and outputs and isinstance(outputs[0], dict) else None


PROTOCOL = KServeV2Protocol()

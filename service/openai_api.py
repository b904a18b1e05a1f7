"""The OpenAI embeddings wire format: request validation, error bodies, response encoding."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson

from service.metrics import STAGES

EncodingFormat = Literal["float", "base64"]


CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that hung up before the answer


@dataclass(eq=False)
class ApiError(Exception):
    """An HTTP error with an OpenAI-style body: {"error": {"message", "type", "code", "param"}}."""

    status: int
    message: str
    code: str
    error_type: str = "invalid_request_error"
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.error_type, self.code, self.param)


def error_body(message: str, error_type: str, code: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "code": code, "param": param}}


@dataclass(frozen=True)
class EmbeddingRequest:
    texts: list[str]
    model: str | None
    encoding_format: EncodingFormat
    dimensions: int | None
    single: bool


def bad_request(message: str, code: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, code, param=param)


def json_object(content_type: str, raw_body: bytes, field: str) -> dict[str, Any]:
    """A request body as a JSON object, or the 415/400 ApiError that says what to send; field: the one the
    route needs first, named in the messages."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        message = f"Content-Type must be application/json, got {content_type or 'none'!r}"
        raise ApiError(415, message, "unsupported_media_type")
    try:
        payload = json.loads(raw_body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"request body is not valid JSON: {exc}", "invalid_json") from None
    except RecursionError:
        raise bad_request(
            f'request body is nested too deeply; send a flat object {{"{field}": ...}}', "invalid_json"
        ) from None
    if not isinstance(payload, dict):
        raise bad_request(f"request body must be a JSON object with an '{field}' field", "invalid_request")
    return payload


def _is_token_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(type(v) is int for v in value)  # bool is no id


def parse_embedding_request(content_type: str, raw_body: bytes, max_inputs: int, dimension: int) -> EmbeddingRequest:
    """Validate one POST /v1/embeddings body; every problem becomes a 4xx ApiError that says what to send."""
    payload = json_object(content_type, raw_body, "input")
    if "input" not in payload:
        raise bad_request("'input' is required: a string or a list of strings", "missing_input", "input")
    texts, single = _parse_input(payload["input"], max_inputs)
    model = payload.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request("'model' must be a string", "invalid_model", "model")
    encoding_format: EncodingFormat = payload.get("encoding_format") or "float"
    if encoding_format not in ("float", "base64"):
        message = f"'encoding_format' must be 'float' or 'base64', got {encoding_format!r}"
        raise bad_request(message, "invalid_encoding_format", "encoding_format")
    dimensions = payload.get("dimensions")
    if dimensions is not None and not (type(dimensions) is int and 1 <= dimensions <= dimension):  # no bool
        message = f"'dimensions' must be an integer from 1 to {dimension}, got {dimensions!r}"
        raise bad_request(message, "invalid_dimensions", "dimensions")
    return EmbeddingRequest(texts, model, encoding_format, dimensions, single)


def _parse_input(value: Any, max_inputs: int) -> tuple[list[str], bool]:
    if isinstance(value, str):
        return [check_text(value, "input", "input", "'input'")], True
    if isinstance(value, list) and (_is_token_ids(value) or any(_is_token_ids(item) for item in value)):
        raise bad_request(
            "token-id arrays are not supported by this service; send the text as a string or a list of strings",
            "token_ids_unsupported",
            "input",
        )
    return text_list(value, "input", max_inputs, "a string or a list of strings"), False


def text_list(value: Any, param: str, most: int, expected: str, why_most: str = "") -> list[str]:
    """value as a list of 1 to `most` non-empty strings, or the 400 that says what is wrong; expected: what
    the request should send, why_most: the reason for the limit, when one needs saying."""
    if not isinstance(value, list):
        raise bad_request(f"'{param}' must be {expected}, got {type(value).__name__}", "invalid_input", param)
    if not value:
        raise bad_request(f"'{param}' must not be an empty list", "empty_input", param)
    if len(value) > most:
        message = f"'{param}' has {len(value)} items; at most {most} are allowed per request{why_most}"
        raise bad_request(message, "too_many_inputs", param)
    for index, item in enumerate(value):
        check_text(item, f"{param}[{index}]", param)
    return list(value)


def check_text(value: Any, where: str, param: str, name: str | None = None) -> str:
    """value, when it is a non-empty string of valid Unicode; else the 400 that says so. name: what the
    messages call it (default: where)."""
    name = name or where
    if not isinstance(value, str):
        raise bad_request(f"{name} must be a string, got {type(value).__name__}", "invalid_input", param)
    if not value:
        raise bad_request(f"{name} must not be an empty string", "empty_input", param)
    try:  # JSON escapes can carry lone surrogates ("\\ud800") that no tokeniser can encode: refuse them here
        if not value.isascii():
            value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad_request(
            f"{where} is not valid Unicode (unpaired surrogate at character {exc.start}); send UTF-8 text",
            "invalid_unicode",
            param,
        ) from None
    return value


def request_body_schema(
    max_inputs: int, dimension: int, max_input_chars: int, model_names: list[str] | None = None
) -> dict[str, Any]:
    """The JSON schema of a POST /v1/embeddings body, for the OpenAPI document (the route reads raw bytes)."""
    text = {"type": "string", "minLength": 1, "maxLength": max_input_chars}
    model: dict[str, Any] = {"type": "string", "description": "The served model id (or one of its aliases)."}
    if model_names:
        model["enum"] = model_names
    return {
        "title": "EmbeddingRequest",
        "type": "object",
        "required": ["input", "model"],
        "properties": {
            "input": {
                "description": "Text to embed: a string or a list of strings.",
                "anyOf": [text, {"type": "array", "items": text, "minItems": 1, "maxItems": max_inputs}],
            },
            "model": model,
            "encoding_format": {"type": "string", "enum": ["float", "base64"], "default": "float"},
            "dimensions": {"type": "integer", "minimum": 1, "maximum": dimension},
            "user": {"type": "string"},
        },
    }


def encode_vector(vector: np.ndarray, encoding_format: EncodingFormat) -> np.ndarray | str:
    """float: the float32 vector itself, which `dump_json` writes as a JSON list of the shortest decimals that
    read back to the same float32 values; base64: little-endian float32 bytes, as the openai client decodes them."""
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4", copy=False).tobytes()).decode("ascii")
    return np.ascontiguousarray(vector, dtype=np.float32)


def dump_json(payload: object) -> bytes:
    """A response body with numpy vectors in it (orjson: ~10x faster than json for a 384-float vector)."""
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)


def shorten(vectors: np.ndarray, dimensions: int | None) -> np.ndarray:
    """Keep the first `dimensions` components and re-normalise (the OpenAI `dimensions` behaviour)."""
    if dimensions is None or dimensions >= vectors.shape[1]:
        return vectors
    cut = vectors[:, :dimensions]
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    return (cut / np.maximum(norms, 1e-12)).astype(np.float32)


def server_timing(stages_ms: dict[str, float]) -> str:
    """The Server-Timing header: every stage, 0 where stages_ms has none (a refusal has only a total)."""
    return ", ".join(f"{stage};dur={stages_ms.get(stage, 0):.3f}" for stage in STAGES)

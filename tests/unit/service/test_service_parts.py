"""Request validation, the LRU cache, admission limits, settings and CLI flags."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from embedperf.errors import ConfigError
from modelcore.model_folder import read_pooling
from service.access_log import RequestIds, request_id_from
from service.admission import key_is_valid
from service.cache import EmbeddingCache
from service.cli import build_parser, settings_from_args
from service.metrics import ServiceMetrics
from service.openai_api import (
    ApiError,
    encode_vector,
    parse_embedding_request,
    request_body_schema,
    shorten,
)
from service.request_io import TRUNCATE_CHARS_PER_TOKEN, ConcurrencyLimit, RateLimit, limit_chars
from service.settings import ServiceSettings


def parse(body: object, content_type: str = "application/json") -> object:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_embedding_request(content_type, raw, max_inputs=3, dimension=8)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"input": ""}, 400, "empty_input"),
        ({"input": []}, 400, "empty_input"),
        ({"input": ["a", ""]}, 400, "empty_input"),
        ({"input": ["a", 3]}, 400, "invalid_input"),
        ({"input": [1, 2, 3]}, 400, "token_ids_unsupported"),
        ({"input": [[1, 2], [3]]}, 400, "token_ids_unsupported"),
        ({"input": ["a"] * 4}, 400, "too_many_inputs"),
        ({"nothing": 1}, 400, "missing_input"),
        ([1, 2], 400, "invalid_request"),
        (b"{not json", 400, "invalid_json"),
        ({"input": "a", "encoding_format": "int8"}, 400, "invalid_encoding_format"),
        ({"input": "a", "dimensions": 0}, 400, "invalid_dimensions"),
        ({"input": "a", "dimensions": 9}, 400, "invalid_dimensions"),
        ({"input": "a", "dimensions": True}, 400, "invalid_dimensions"),
        ({"input": "a", "model": 5}, 400, "invalid_model"),
    ],
)
def test_bad_bodies_get_openai_errors(body: object, status: int, code: str) -> None:
    with pytest.raises(ApiError) as info:
        parse(body)
    assert info.value.status == status and info.value.code == code
    assert set(info.value.body()["error"]) >= {"message", "type", "code"}


def test_wrong_content_type_is_415() -> None:
    with pytest.raises(ApiError) as info:
        parse({"input": "a"}, content_type="text/plain")
    assert info.value.status == 415


def test_good_body_parses() -> None:
    request = parse({"input": ["a", "b"], "model": "m", "encoding_format": "base64", "dimensions": 4})
    assert request.texts == ["a", "b"] and request.dimensions == 4 and request.encoding_format == "base64"  # type: ignore[attr-defined]
    assert parse({"input": "x"}).single  # type: ignore[attr-defined]


def test_base64_is_little_endian_float32_and_dimensions_renormalise() -> None:
    vector = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    decoded = np.frombuffer(base64.b64decode(encode_vector(vector, "base64")), dtype="<f4")  # type: ignore[arg-type]
    assert decoded.tolist() == vector.tolist()
    short = shorten(np.array([[3.0, 4.0, 12.0]], dtype=np.float32), 2)
    assert np.allclose(short, [[0.6, 0.8]])


def test_cache_is_lru_and_size_zero_disables() -> None:
    cache = EmbeddingCache(2)
    for text in ("a", "b"):
        cache.put(text, np.zeros(2), 3)
    assert cache.get("a") is not None
    cache.put("c", np.ones(2), 4)
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    off = EmbeddingCache(0)
    off.put("a", np.zeros(2), 1)
    assert off.get("a") is None and len(off) == 0


def test_concurrency_and_rate_limits() -> None:
    limit = ConcurrencyLimit(2)
    assert limit.try_acquire() and limit.try_acquire() and not limit.try_acquire()
    limit.release()
    assert limit.try_acquire()
    now = [0.0]
    rate = RateLimit(2.0, clock=lambda: now[0])
    assert rate.try_acquire()[0] and rate.try_acquire()[0]
    admitted, retry_after_s = rate.try_acquire()
    assert not admitted and retry_after_s >= 1
    now[0] = 0.6
    assert rate.try_acquire()[0]
    assert RateLimit(0).try_acquire() == (True, 0)


def test_cli_flags_override_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDPERF_MAX_BATCH_SIZE", "8")
    monkeypatch.setenv("EMBEDPERF_CACHE_SIZE", "100")
    settings = settings_from_args(["--max-batch-size", "64", "--no-batching", "--long-input", "reject"])
    assert settings.max_batch_size == 64 and settings.cache_size == 100
    assert settings.batching is False and settings.long_input == "reject"
    assert settings.port == 8086 and settings.host == "127.0.0.1"


def test_api_keys_are_not_shown_and_bad_values_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDPERF_API_KEYS", "k1, k2")
    settings = settings_from_args([])
    assert settings.api_key_list() == ["k1", "k2"]
    assert "api_keys" not in settings.public_config() and settings.public_config()["auth_enabled"]
    with pytest.raises(ConfigError, match="device"):
        settings_from_args(["--device", "tpu"])
    with pytest.raises(ConfigError, match="max_batch_size"):
        settings_from_args(["--max-batch-size", "0"])
    # the HTTP server's own bounds: a head timeout of at most 60 s, a head buffer (half the limit) of 8 KiB up
    with pytest.raises(ConfigError, match="keep_alive_timeout_s"):
        settings_from_args(["--keep-alive-timeout-s", "61"])
    with pytest.raises(ConfigError, match="max_header_bytes"):
        settings_from_args(["--max-header-bytes", "16383"])


def test_every_flag_has_help() -> None:
    for action in build_parser()._actions:
        assert action.help, action.option_strings


def test_pooling_follows_model_config(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    assert read_pooling(root) == "mean"
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    assert read_pooling(root) == "cls"
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}))
    assert read_pooling(root) == "lasttoken"


def test_inconsistent_limits_and_empty_key_lists_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"max_inputs \(2048\) exceeds queue_size \(1024\)"):
        settings_from_args(["--queue-size", "1024", "--max-inputs", "2048"])
    assert settings_from_args(["--queue-size", "1024", "--max-inputs", "1024"]).queue_size == 1024
    assert ServiceSettings().max_inputs <= ServiceSettings().queue_size
    monkeypatch.setenv("EMBEDPERF_API_KEYS", " , ,, ")
    with pytest.raises(ConfigError, match="only commas or whitespace"):
        settings_from_args([])


def test_character_limit_applies_before_tokenising() -> None:
    texts = ["short", "x" * 10_000]
    cut = limit_chars(texts, max_input_chars=50_000, long_input="truncate", max_tokens=256)
    assert cut == ["short", "x" * (256 * TRUNCATE_CHARS_PER_TOKEN)]
    assert limit_chars(texts, 100, "truncate", 256)[1] == "x" * 100
    assert limit_chars(texts, 10_000, "reject", 256) == texts
    with pytest.raises(ApiError) as info:
        limit_chars(texts, 9_999, "reject", 256)
    assert info.value.status == 413 and info.value.code == "input_too_long"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"input": "\\ud800"}', "invalid_unicode"),
        (b'{"input": ["ok", "\\udfff tail"]}', "invalid_unicode"),
        (b'{"input": "\xc3\x28"}', "invalid_json"),
        (b"[" * 50_000 + b"]" * 50_000, "invalid_json"),
    ],
)
def test_invalid_unicode_and_deep_nesting_are_400(raw: bytes, code: str) -> None:
    with pytest.raises(ApiError) as info:
        parse(raw)
    assert info.value.status == 400 and info.value.code == code


def test_request_body_schema_matches_the_validator() -> None:
    schema = request_body_schema(max_inputs=3, dimension=8, max_input_chars=100, model_names=["m", "m-alias"])
    assert schema["required"] == ["input", "model"] and schema["properties"]["model"]["enum"] == [
        "m",
        "m-alias",
    ]
    assert schema["properties"]["dimensions"] == {"type": "integer", "minimum": 1, "maximum": 8}
    array = schema["properties"]["input"]["anyOf"][1]
    assert array["maxItems"] == 3 and array["items"]["minLength"] == 1


def test_help_states_the_defaults_an_embedding_service_runs_with() -> None:
    helps = {action.dest: action.help or "" for action in build_parser()._actions}
    assert "(default: 5000.0)" in helps["deadline_ms"] and "(default: 0.5)" in helps["admit_wait_share"]
    assert "(default: 10.0)" in helps["shutdown_grace_s"] and "(default: 8192)" in helps["max_request_tokens"]
    assert "/health and /ready" in helps["api_keys"] and "(default: -)" in helps["access_log"]
    assert "(default: 65536)" in helps["max_header_bytes"] and "header_timeout_s" not in helps


def test_the_fallback_is_named_and_never_the_main_model_itself() -> None:
    assert ServiceSettings().fallback_model_id() is None
    assert settings_from_args(["--fallback-precision", "int8"]).fallback_model_id() == "all-MiniLM-L6-v2@int8"
    light = settings_from_args(["--fallback-model", "/models/minilm-l3"])
    assert light.fallback_model_id() == "minilm-l3"
    with pytest.raises(ConfigError, match="the fallback would be the main model"):
        settings_from_args(["--fallback-precision", "fp32"])


def test_a_usable_client_request_id_is_kept_and_any_other_replaced() -> None:
    def scope(value: bytes | None) -> dict[str, object]:
        return {"headers": [] if value is None else [(b"x-request-id", value)]}

    ids = RequestIds()
    assert request_id_from(scope(b"run-7/42"), ids) == "run-7/42"
    for unusable in (None, b"", b"has space", b"x" * 201, "caf\u00e9".encode("latin-1")):
        assert re.fullmatch(r"[0-9a-f]{32}", request_id_from(scope(unusable), ids)), unusable
    new = {request_id_from(scope(None), ids) for _ in range(1000)} | {request_id_from(scope(None), RequestIds())}
    assert len(new) == 1001  # never repeated, within a process or across two


def test_only_a_bearer_key_from_the_list_is_valid() -> None:
    keys = [b"k1", b"k2"]
    assert key_is_valid(b"Bearer k2", keys) and key_is_valid(b"bearer k1", keys)
    for header in (b"", b"Bearer", b"Bearer k3", b"Basic k1", b"k1", b"Bearer k1x"):
        assert not key_is_valid(header, keys), header


TRACED_PROBE = """
import asyncio, httpx
from opentelemetry import trace
from service.local_app import create_app
from service.settings import ServiceSettings

asked = []

class Recording(trace.TracerProvider):
    def get_tracer(self, *args, **kwargs):
        asked.append(args[0])
        return trace.NoOpTracer()

trace.set_tracer_provider(Recording())
assert trace.get_tracer("probe") is not None and asked == ["probe"]  # the provider is the one in use

async def main():
    transport = httpx.ASGITransport(app=create_app(ServiceSettings()))
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        print((await client.get("/health")).status_code, (await client.post("/v1/embeddings", json={})).status_code)

asyncio.run(main())
print(asked)
"""


def test_a_tracer_set_up_in_the_environment_traces_no_request() -> None:
    """FastAPI's OpenTelemetry would trace every request through a globally set tracer provider: it is off, so
    the front end's cost per request is the service's own."""
    done = subprocess.run([sys.executable, "-c", TRACED_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["200 503", "['probe']"], done.stdout


def test_the_request_metrics_of_one_turn_of_the_loop_are_written_together_at_its_end() -> None:
    metrics = ServiceMetrics()
    ok, total = metrics.requests.labels(status="200"), metrics.stage_seconds["total"]

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(f"embedperf_{name}", labels)

    async def go() -> list[tuple[float | None, ...]]:
        seen = []
        for latency_s in (0.001, 0.02, 3.0):
            metrics.writes.inc(metrics.inflight)
            metrics.writes.inc(ok)
            metrics.writes.observe(total, latency_s)
        metrics.writes.inc(metrics.inflight, -1.0)
        seen.append((value("requests_total", status="200"), value("stage_duration_seconds_count", stage="total")))
        await asyncio.sleep(0)  # the turn ends
        seen.append((value("requests_total", status="200"), value("stage_duration_seconds_count", stage="total")))
        seen.append((value("inflight_requests"), round(value("stage_duration_seconds_sum", stage="total") or 0, 6)))
        metrics.writes.inc(ok)
        rendered = metrics.render().decode()  # writes what is pending first
        seen.append((float('embedperf_requests_total{status="200"} 4.0' in rendered),))
        return seen

    assert asyncio.run(go()) == [(0.0, 0.0), (3.0, 3.0), (2.0, 3.021), (1.0,)]


@pytest.mark.parametrize(
    ("options", "pinned"),
    [
        ({}, False),  # cpu inference: its workers need the kernel free to move a front end off their cores
        ({"compute_sleep_ms": 2.0}, True),  # nothing computes on the host
        ({"device": "cuda"}, True),
        ({"device": "npu:0,npu:1"}, True),
        ({"pin_front_ends": "on"}, True),
        ({"pin_front_ends": "off", "device": "cuda"}, False),
    ],
)
def test_front_ends_are_pinned_to_one_cpu_unless_the_engine_computes_on_the_host(
    options: dict[str, object], pinned: bool
) -> None:
    assert ServiceSettings(**options).front_ends_pinned() is pinned  # type: ignore[arg-type]

"""A small bounded schemathesis pass over the running service's OpenAPI document: no input may cause a 5xx.

Uses schemathesis's Python API with hypothesis directly (its pytest plugin does not support pytest 9 yet).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

FUZZ_EXAMPLES = 25  # per operation and mode; `make fuzz` runs the larger pass


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_makes_a_server_error(
    reference_service: str, mode: GenerationMode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # hypothesis and schemathesis keep their caches in the working directory
    schema = schemathesis.openapi.from_url(f"{reference_service}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    paths = {(operation.method.upper(), operation.path) for operation in operations}
    assert ("POST", "/v1/embeddings") in paths
    embeddings = next(op for op in operations if op.path == "/v1/embeddings")
    assert embeddings.body, "the OpenAPI document must describe the request body"
    assert ("POST", "/rerank") in paths
    if mode is GenerationMode.NEGATIVE:  # only a body can be made invalid; the GET routes take no input
        operations = [op for op in operations if op.path in ("/v1/embeddings", "/rerank")]
        assert all(op.body for op in operations), "the OpenAPI document must describe the request bodies"
    called = 0
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=FUZZ_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def no_server_error(case: schemathesis.Case) -> None:
            nonlocal called
            called += 1
            case.call_and_validate(checks=[not_a_server_error], timeout=60)

        no_server_error()
    assert called >= len(operations)

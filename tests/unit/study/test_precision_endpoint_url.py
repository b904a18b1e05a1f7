"""precision --endpoint takes the same base URLs as `run`: with or without /v1, with a trailing slash."""

from __future__ import annotations

import pytest

from embedperf.errors import TargetError
from study.precision.compare import EndpointEncoder


@pytest.mark.parametrize(
    "base",
    [
        "http://127.0.0.1:8086",
        "http://127.0.0.1:8086/",
        "http://127.0.0.1:8086/v1",
        "http://127.0.0.1:8086/v1/",
    ],
)
def test_endpoint_url_is_normalised_like_run(base: str) -> None:
    assert EndpointEncoder(base, "m").url == "http://127.0.0.1:8086/v1/embeddings"


def test_endpoint_under_a_prefix_keeps_it() -> None:
    assert EndpointEncoder("http://h:1/embed-svc/v1", "m").url == "http://h:1/embed-svc/v1/embeddings"


def test_endpoint_without_scheme_is_a_usage_error() -> None:
    with pytest.raises(TargetError, match="no scheme"):
        EndpointEncoder("127.0.0.1:8086", "m")

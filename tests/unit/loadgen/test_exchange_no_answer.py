"""A request sent through the session's user agent: no answer at all is a failed row with status 0 and the
reason, an answer outside 2xx/3xx (which the agent raises with the response on it) keeps its status."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from loadgen.traffic.context import build_context
from loadgen.traffic.exchange import NoAnswer, post, send_embeddings
from loadgen.traffic.payloads import RequestPayload
from scenarios.loader import load_scenario


class _Answered:
    status_code = 503
    content = b'{"error": "busy"}'
    headers: dict[str, str] = {}


class _BadStatus(Exception):
    """What Locust's user agent raises for a status outside its valid codes: the answer rides on it."""

    def __init__(self, response: Any) -> None:
        super().__init__("bad status")
        self.response = response


class _Agent:
    """FastHttpSession's parts: `client` (the user agent), `base_url`, `auth_header`, `request_event`."""

    base_url = "http://127.0.0.1:1"
    auth_header = None

    def __init__(self, raises: BaseException) -> None:
        self.raises = raises
        self.client = self
        self.request_event = self
        self.fired: list[dict[str, Any]] = []

    def urlopen(self, url: str, method: str, payload: str, headers: dict[str, str]) -> Any:
        raise self.raises

    def fire(self, **kwargs: Any) -> None:
        self.fired.append(kwargs)


def _send(agent: _Agent) -> dict[str, Any]:
    ctx = build_context(load_scenario("smoke", environ={}), agent.base_url, lambda row: None, "local", None)
    row = send_embeddings(agent, ctx, RequestPayload(["a"], "/v1/embeddings"))  # type: ignore[arg-type]
    return asdict(row)


def test_no_answer_is_a_failed_row_with_its_reason() -> None:
    agent = _Agent(ConnectionRefusedError(111, "refused"))
    got = _send(agent)
    assert (got["status_code"], got["ok"], got["response_bytes"]) == (None, False, 0)
    assert got["error"].startswith("ConnectionRefusedError")
    assert str(agent.fired[-1]["exception"]) == got["error"]  # Locust counts the same failure
    assert isinstance(agent.fired[-1]["response"], NoAnswer)


def test_an_answer_raised_with_its_status_keeps_the_status() -> None:
    agent = _Agent(_BadStatus(_Answered()))
    got = _send(agent)
    assert (got["status_code"], got["ok"], got["error"]) == (503, False, "HTTP 503")
    assert got["response_bytes"] == len(_Answered.content)
    assert post(agent, "http://x/", "{}", {}) is agent.raises.response  # type: ignore[arg-type,attr-defined]

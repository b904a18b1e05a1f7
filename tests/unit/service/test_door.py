"""The door: a burst of requests decided in one loop iteration sees the ones it already let in, so only as
many as the batcher would take pass; the others get 429 with Retry-After, counted in the metrics."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from service.admission import DOOR_JUDGED_INPUTS, admit_at_door, door_refusal
from service.app import ServiceState, _submit, create_app
from service.batch_errors import Overloaded
from service.door_protocol import refusal_bytes
from service.openai_api import ApiError
from service.request_io import ConnectionLost
from service.settings import ServiceSettings

ROOM = 3  # requests the stub batcher takes before its estimated wait exceeds the deadline


class StubBatcher:
    def __init__(self) -> None:
        self.queued = 0

    def check_admission(
        self, n_inputs: int, deadline_ms: float, ahead_inputs: int = 0, judged_inputs: int = 0
    ) -> None:
        if self.queued + ahead_inputs + n_inputs > ROOM:
            raise Overloaded(estimated_wait_s=2.5, limit_s=2.0)

    def estimated_wait_s(self, extra_inputs: int = 0) -> float:
        return 2.5


def ready_state() -> ServiceState:
    state: ServiceState = create_app(ServiceSettings()).state.service
    state.batcher = StubBatcher()  # type: ignore[assignment]
    state.ready = True
    return state


def test_a_burst_decided_in_one_iteration_lets_in_only_what_the_batcher_would_take() -> None:
    async def main() -> tuple[list[int | None], list[int], list[int | None]]:
        state = ready_state()
        started: list[int] = []

        def start(i: int) -> bool:
            started.append(i)
            return True

        burst = [admit_at_door(state, lambda i=i: start(i)) for i in range(10)]
        await asyncio.sleep(0)  # next iteration: the handlers of the admitted ones have run
        later = [admit_at_door(state, lambda: start(-1)) for _ in range(2)]
        return [e.status if e else None for e in burst], started, [e.status if e else None for e in later]

    burst, started, later = asyncio.run(main())
    assert burst == [None] * ROOM + [429] * (10 - ROOM)
    assert started == [0, 1, 2, -1, -1]  # only those let in were started, in order
    assert later == [None, None]  # the gate's count is empty again and the stub queue is too


def test_a_request_let_in_while_not_ready_starts_at_once_to_be_answered_503() -> None:
    async def main() -> tuple[ApiError | None, list[str], int]:
        state = ready_state()
        state.ready = False
        started: list[str] = []
        refusal = admit_at_door(state, lambda: started.append("handler") is None)
        return refusal, started, state.loop_gate.waiting

    refusal, started, waiting = asyncio.run(main())
    assert (refusal, started, waiting) == (None, ["handler"], 0)


def test_a_refusal_carries_retry_after_and_is_counted() -> None:
    state = ready_state()
    state.batcher.queued = ROOM  # type: ignore[union-attr]
    refusal = door_refusal(state)
    assert refusal is not None and refusal.status == 429 and refusal.code == "overloaded"
    assert int(refusal.headers["Retry-After"]) >= 3  # 2.5 s of wait, rounded up, plus a random spread
    assert state.metrics.requests.labels(status="429")._value.get() == 1


def test_the_door_is_open_while_the_service_is_not_ready() -> None:
    state = ready_state()
    state.batcher.queued = ROOM  # type: ignore[union-attr]
    state.ready = False
    assert door_refusal(state) is None  # the route answers 503 not ready itself


def test_the_served_protocol_asks_the_services_door() -> None:
    from service.cli import uvicorn_config
    from service.door_protocol import DoorProtocol

    settings = ServiceSettings()
    app = create_app(settings)
    state: ServiceState = app.state.service
    state.batcher = StubBatcher()  # type: ignore[assignment]
    state.ready = True
    protocol = uvicorn_config(settings, app).http
    assert isinstance(protocol, type) and issubclass(protocol, DoorProtocol)
    assert protocol.header_timeout_s == settings.header_timeout_s
    assert protocol.door is not None
    state.batcher.queued = ROOM  # type: ignore[union-attr]
    refusal = protocol.door(lambda: pytest.fail("a refused request must not start"))
    assert refusal is not None and refusal.status == 429


def test_connection_lost_runs_callbacks_once_and_late_subscribers_at_once() -> None:
    lost = ConnectionLost()
    calls: list[str] = []
    lost.subscribe(lambda: calls.append("early"))
    assert calls == []
    lost.fire()
    lost.fire()
    assert calls == ["early"]
    lost.subscribe(lambda: calls.append("late"))  # the connection is already gone: run it now
    assert calls == ["early", "late"]


def test_ready_made_refusals_keep_each_answers_own_date_timing_and_retry_after() -> None:
    def refusal(retry_after: str) -> ApiError:
        return ApiError(429, "busy", "overloaded", "rate_limit_error", headers={"Retry-After": retry_after})

    first = refusal_bytes(refusal("2"), 0.012, [(b"date", b"Mon, 30 Nov 2026 12:00:00 GMT")], True)
    again = refusal_bytes(refusal("2"), 0.345, [(b"date", b"Mon, 30 Nov 2026 12:00:01 GMT")], True)
    other = refusal_bytes(refusal("5"), 0.012, [(b"date", b"Mon, 30 Nov 2026 12:00:01 GMT")], False)
    assert b"date: Mon, 30 Nov 2026 12:00:01 GMT\r\n" in again and b"total;dur=0.345\r\n" in again
    assert first.replace(b"12:00:00", b"12:00:01").replace(b"0.012", b"0.345") == again
    assert b"retry-after: 5\r\n" in other and b"connection: close\r\n" in other
    head, _, body = other.partition(b"\r\n\r\n")
    assert int(re.search(rb"content-length: (\d+)", head).group(1)) == len(body)  # type: ignore[union-attr]
    assert json.loads(body)["error"]["code"] == "overloaded"


def test_the_route_tells_the_batcher_how_many_inputs_the_door_judged() -> None:
    """A request let in at the door was judged as one input; the batcher must not judge that input again."""
    judged: list[int] = []

    class RecordingBatcher(StubBatcher):
        async def submit(
            self, texts: list[str], deadline_ms: float, hangup: object = None, judged_inputs: int = 0
        ) -> None:
            judged.append(judged_inputs)

    state = ready_state()
    state.batcher = RecordingBatcher()  # type: ignore[assignment]
    asyncio.run(_submit(state, ["one input"], [0], None))
    assert judged == [DOOR_JUDGED_INPUTS] == [1]


class HoldTransport:
    def __init__(self) -> None:
        self.paused = 0

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self.paused += 1


class HoldLoop:
    def __init__(self) -> None:
        self.timers: list[float] = []

    def call_later(self, delay_s: float, callback: object) -> None:
        self.timers.append(delay_s)


def test_a_request_read_as_its_hold_ends_is_not_held_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hold's timer may fire a hair before the clock reaches the Retry-After; the request it lets be
    read must count as on time, or a client made to wait would be held once more."""
    from service import door_protocol

    protocol = object.__new__(door_protocol.DoorProtocol)
    transport, loop, holds = HoldTransport(), HoldLoop(), []
    protocol.transport, protocol.loop = transport, loop  # type: ignore[assignment]
    protocol.on_hold = lambda: holds.append(1)  # type: ignore[method-assign]
    refusal = ApiError(429, "overloaded", "overloaded", headers={"Retry-After": "1"})
    clock = iter([100.0, 100.2, 101.199, 101.3])  # refused; again at once; read 1 ms before; again at once
    monkeypatch.setattr(door_protocol.time, "monotonic", lambda: next(clock))
    protocol._hold_if_early(refusal)
    assert (transport.paused, holds) == (0, [])
    protocol._hold_if_early(refusal)  # early: held until its new Retry-After (1 s)
    assert (transport.paused, holds, loop.timers) == (1, [1], [1.0])
    protocol._hold_if_early(refusal)  # read as that hold ended (timer 1 ms early): on time
    assert (transport.paused, holds) == (1, [1])
    protocol._hold_if_early(refusal)  # but sending again at once is early again
    assert (transport.paused, holds) == (2, [1, 1])


def test_mark_runs_the_on_mark_callbacks_once_and_fire_the_others_after() -> None:
    lost = ConnectionLost()
    calls: list[str] = []
    lost.on_mark(lambda: calls.append("marked"))
    lost.subscribe(lambda: calls.append("fired"))
    lost.mark()
    assert lost.lost and calls == ["marked"]
    lost.mark()
    lost.fire()
    lost.fire()
    assert calls == ["marked", "fired"]
    lost.on_mark(lambda: calls.append("late"))  # already gone: at once
    assert calls == ["marked", "fired", "late"]


def test_fire_alone_runs_the_on_mark_callbacks_first() -> None:
    lost = ConnectionLost()
    calls: list[str] = []
    lost.subscribe(lambda: calls.append("fired"))
    lost.on_mark(lambda: calls.append("marked"))
    lost.fire()
    assert calls == ["marked", "fired"]

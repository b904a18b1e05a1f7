"""Hung-up connections are closed and cleaned up a slice at a time; their requests are marked gone at once."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from service.door_protocol import DoorProtocol
from service.request_io import CONNECTION_LOST, ConnectionLost
from service.teardown import Teardown


def test_calls_run_in_order_a_slice_per_turn_with_a_pause_between() -> None:
    async def go() -> list[tuple[int, float]]:
        loop = asyncio.get_running_loop()
        teardown = Teardown(slice_size=2, pause_s=0.05)
        ran: list[tuple[int, float]] = []
        for index in range(5):
            teardown.add(lambda i: ran.append((i, loop.time())), index)
        assert ran == [] and len(teardown) == 5  # nothing runs inside add()
        await asyncio.sleep(0)
        assert [i for i, _ in ran] == [0, 1]  # the first slice on the next iteration
        while len(teardown):
            await asyncio.sleep(0.01)
        return ran

    ran = asyncio.run(go())
    assert [i for i, _ in ran] == [0, 1, 2, 3, 4]
    at = [t for _, t in ran]
    assert at[1] - at[0] < 0.01 and at[3] - at[2] < 0.01  # two per turn, in one go
    assert at[2] - at[1] >= 0.045 and at[4] - at[3] >= 0.045  # turns pause_s apart


def test_a_failing_call_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[int] = []

    def fail() -> None:
        raise RuntimeError("socket already gone")

    async def go() -> None:
        teardown = Teardown(slice_size=8, pause_s=0.001)
        teardown.add(ran.append, 1)
        teardown.add(fail)
        teardown.add(ran.append, 2)
        await asyncio.sleep(0.01)

    with caplog.at_level(logging.ERROR, logger="service.teardown"):
        asyncio.run(go())
    assert ran == [1, 2]
    assert "clean-up of a closed connection failed" in caplog.text


def test_calls_left_by_a_closed_event_loop_run_on_the_next() -> None:
    teardown = Teardown(slice_size=1, pause_s=10.0)
    ran: list[str] = []

    async def leave_one_queued() -> None:
        teardown.add(ran.append, "first")
        teardown.add(ran.append, "left")  # its turn is 10 s away when the loop closes
        await asyncio.sleep(0.01)

    async def add_another() -> None:
        teardown.add(ran.append, "next loop")
        await asyncio.sleep(0.01)

    asyncio.run(leave_one_queued())
    assert ran == ["first"]
    asyncio.run(add_another())
    assert ran == ["first", "left"]  # scheduled again on this loop: one slice per turn
    assert len(teardown) == 1


@dataclass
class StubTransport:
    closed: int = 0

    def close(self) -> None:
        self.closed += 1

    def is_closing(self) -> bool:
        return self.closed > 0


@dataclass
class StubCycle:
    scope: dict[str, Any]
    response_complete: bool = False
    disconnected: bool = False


@dataclass
class Wiring:
    protocol: DoorProtocol
    transport: StubTransport
    cycle: StubCycle
    signal: ConnectionLost
    fired: list[str] = field(default_factory=list)
    uvicorn_lost: list[Exception | None] = field(default_factory=list)


def wired_protocol(teardown: Teardown, monkeypatch: pytest.MonkeyPatch) -> Wiring:
    """A DoorProtocol with a request in flight, its transport and uvicorn's own connection_lost stood in for."""
    signal = ConnectionLost()
    cycle = StubCycle(scope={"extensions": {CONNECTION_LOST: signal}})
    protocol = object.__new__(DoorProtocol)
    transport = StubTransport()
    protocol.transport, protocol.cycle, protocol.teardown = transport, cycle, teardown  # type: ignore[assignment]
    wiring = Wiring(protocol, transport, cycle, signal)
    signal.subscribe(lambda: wiring.fired.append("abandoned"))
    monkeypatch.setattr(
        "service.header_timeout.HeaderTimeoutProtocol.connection_lost",
        lambda self, exc: wiring.uvicorn_lost.append(exc),
    )
    return wiring


def test_the_end_of_a_clients_stream_marks_its_request_gone_at_once_and_closes_a_turn_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def go() -> None:
        w = wired_protocol(Teardown(slice_size=4, pause_s=0.01), monkeypatch)
        assert w.protocol.eof_received() is True  # uvloop keeps the transport open: the queue closes it
        assert w.signal.lost and w.cycle.disconnected  # the batcher's workers skip its work from now on
        assert w.fired == [] and w.transport.closed == 0  # the costly part waits for the queue
        assert w.protocol.eof_received() is True  # reading resumed and EOF seen again: closed once only
        await asyncio.sleep(0)
        assert w.transport.closed == 1 and w.fired == []
        w.protocol.connection_lost(None)  # what uvloop calls once the transport has closed
        assert w.fired == [] and w.uvicorn_lost == []
        await asyncio.sleep(0)
        assert w.fired == ["abandoned"] and w.uvicorn_lost == [None]
        await asyncio.sleep(0.02)
        assert w.transport.closed == 1 and w.fired == ["abandoned"]

    asyncio.run(go())


def test_a_reset_connection_is_marked_at_once_and_cleaned_up_by_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def go() -> None:
        w = wired_protocol(Teardown(), monkeypatch)
        reset = ConnectionResetError(104, "Connection reset by peer")
        w.protocol.connection_lost(reset)  # no EOF first: uvloop has closed the transport itself
        assert w.signal.lost and w.cycle.disconnected and w.fired == []
        await asyncio.sleep(0)
        assert w.fired == ["abandoned"] and w.uvicorn_lost == [reset]
        assert w.transport.closed == 0

    asyncio.run(go())


def test_without_a_queue_everything_happens_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    w = wired_protocol(Teardown(), monkeypatch)
    w.protocol.teardown = None
    assert w.protocol.eof_received() is None  # uvloop closes the transport itself
    w.protocol.connection_lost(None)
    assert w.signal.lost and w.fired == ["abandoned"] and w.uvicorn_lost == [None]


def test_an_answered_request_is_not_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        w = wired_protocol(Teardown(), monkeypatch)
        w.cycle.response_complete = True  # an idle kept-alive connection closing
        w.protocol.eof_received()
        w.protocol.connection_lost(None)
        await asyncio.sleep(0)
        assert not w.signal.lost and not w.cycle.disconnected and w.fired == []
        assert w.uvicorn_lost == [None]

    asyncio.run(go())

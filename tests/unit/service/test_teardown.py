"""Hung-up connections are closed and cleaned up through the teardown queue; their requests are marked gone at
once."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from service.door_protocol import DoorProtocol
from service.request_io import CONNECTION_LOST, ConnectionLost
from service.teardown import Teardown


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

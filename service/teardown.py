"""Close hung-up connections and finish their clean-up a slice at a time, so a mass hang-up does not hold the
event loop (and the GIL) in one piece.

When a load stops, ~1,000 clients close their connections at once. Closing each socket and running its
protocol's clean-up (uvicorn's, abandoning the request's work, freeing its objects) cost ~20 us, ~20 ms in
all in one or two loop iterations, the GIL held throughout: a request arriving then waited that long before
it was read, and computed slower while the rest went on (`make bench-teardown`: 39 ms against 18 ms for the
same request alone). The protocol now only marks the request as gone when it reads the end of the stream
(a flag the batcher's workers read, so none of its work is computed) and queues the rest here: SLICE calls
per turn, PAUSE_S apart, ~10 % of the event loop's time, so live requests are read and computed meanwhile.
"""

from __future__ import annotations

from service.paced_calls import PacedCalls

SLICE = 32  # calls per turn (~0.3 ms of event-loop time)
PAUSE_S = 0.003  # between turns: 1,000 hang-ups are closed in ~0.1 s, and cleaned up in as much again


class Teardown(PacedCalls):
    """The queue of hung-up connections' closes and clean-ups: SLICE per turn, PAUSE_S apart."""

    def __init__(self, slice_size: int = SLICE, pause_s: float = PAUSE_S) -> None:
        super().__init__(slice_size, pause_s)

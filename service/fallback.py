"""Which model serves a new request: the main one, or a lighter fallback while the device stays busy.

The switch looks at the busy fraction of the inference workers averaged over the last `window_s`: at or
above `threshold`, new requests go to the fallback; below it, to the main model again. It changes at most
once per window, so the window that decides a switch back holds only time spent on the fallback. A request
is computed whole by the model chosen when it was submitted (its vectors never mix two models), and every
response names that model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from modelcore.encoder import Encoder


@dataclass(frozen=True)
class Fallback:
    """The lighter model: its id (what responses name) and encoder, and when it takes over."""

    model_id: str
    encoder: Encoder
    threshold: float
    window_s: float


@dataclass(eq=False)
class FallbackSwitch:
    """Thread-safe choice between the main model and the fallback, from a busy-fraction source."""

    main_id: str
    fallback: Fallback
    busy_fraction: Callable[[float], float]
    clock: Callable[[], float] = time.perf_counter
    on_fallback: bool = field(default=False, init=False)  # whether new requests go to the fallback now

    def __post_init__(self) -> None:
        self._t_switch_s = self.clock()  # a window must pass after start before the first switch
        self._lock = threading.Lock()

    def model_for_new_request(self) -> str:
        """The id of the model a request submitted now is computed by."""
        now_s = self.clock()
        with self._lock:
            if now_s - self._t_switch_s >= self.fallback.window_s:
                busy = self.busy_fraction(self.fallback.window_s) >= self.fallback.threshold
                if busy != self.on_fallback:
                    self.on_fallback = busy
                    self._t_switch_s = now_s
            return self.fallback.model_id if self.on_fallback else self.main_id

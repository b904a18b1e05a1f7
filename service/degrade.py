"""How the service degrades under device trouble: smaller batches after out-of-memory, unready after repeated
errors, a lighter fallback model while the device stays busy.

Ascend and CUDA runtimes report memory exhaustion as exceptions whose text names it; a batch that hits it is
split and retried, and the next batches are kept smaller until OOM_RECOVERY_S has passed without another one.
Other device errors fail only their batch, but several within ERROR_WINDOW_S turn /ready to 503 so a balancer
moves traffic away; the window empties by itself and readiness comes back without a restart. The fallback
switch looks at the busy fraction of the inference workers averaged over the last `window_s`: at or above
`threshold`, new requests go to the fallback; below it, to the main model again. It changes at most once per
window, so the window that decides a switch back holds only time spent on the fallback. A request is computed
whole by the model chosen when it was submitted (its vectors never mix two models), and every response names
that model."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from modelcore.encoder import Encoder

OOM_MARKERS = (
    "out of memory",
    "outofmemory",
    "memory allocation",
    "acl_error_rt_memory",
    "ee9999",  # Ascend's generic "device out of memory" error family in torch_npu messages
)
OOM_RECOVERY_S = 30.0  # after this long without an OOM the batch limit doubles back towards its setting
ERROR_WINDOW_S = 30.0
ERRORS_UNREADY = 3  # device errors within ERROR_WINDOW_S that make /ready answer 503


def is_out_of_memory(exc: BaseException) -> bool:
    """True for torch's OutOfMemoryError and for runtime errors whose message names memory exhaustion."""
    if type(exc).__name__ == "OutOfMemoryError" or isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(marker in str(exc).lower() for marker in OOM_MARKERS)


@dataclass(eq=False)
class DeviceHealth:
    """Thread-safe record of device errors: the effective batch limit and whether the device looks healthy."""

    max_batch_size: int
    clock: Callable[[], float] = time.monotonic
    recovery_s: float = OOM_RECOVERY_S
    error_window_s: float = ERROR_WINDOW_S
    errors_unready: int = ERRORS_UNREADY
    oom_total: int = field(default=0, init=False)
    errors_total: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._limit = self.max_batch_size
        self._t_last_oom_s = self._t_last_raise_s = 0.0
        self._errors: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()

    def batch_limit(self) -> int:
        """The batch size to use now: lowered after an OOM, doubled back each recovery_s without one."""
        with self._lock:
            now_s = self.clock()
            since_s = now_s - max(self._t_last_oom_s, self._t_last_raise_s)
            if self._limit < self.max_batch_size and since_s >= self.recovery_s:
                self._limit = min(self.max_batch_size, self._limit * 2)
                self._t_last_raise_s = now_s
            return self._limit

    def record_oom(self, batch_size: int) -> None:
        """A batch of batch_size ran out of memory: keep batches below it for a while."""
        with self._lock:
            self.oom_total += 1
            self._t_last_oom_s = self.clock()
            self._limit = max(1, min(self._limit, batch_size // 2))
        if batch_size <= 1:  # even a single input does not fit: a device error, not a batch-size one
            self.record_error()

    def record_error(self) -> None:
        with self._lock:
            self.errors_total += 1
            self._errors.append(self.clock())

    def recent_errors(self) -> int:
        with self._lock:
            cutoff_s = self.clock() - self.error_window_s
            while self._errors and self._errors[0] < cutoff_s:
                self._errors.popleft()
            return len(self._errors)

    def healthy(self) -> bool:
        return self.recent_errors() < self.errors_unready

    def retry_after_s(self) -> int:
        """Seconds until the oldest recent error leaves the window (when readiness may come back)."""
        with self._lock:
            if not self._errors:
                return 1
            return max(1, int(self._errors[0] + self.error_window_s - self.clock()) + 1)

    def snapshot(self) -> dict[str, int | bool]:
        return {
            "batch_limit": self.batch_limit(),
            "batch_limit_configured": self.max_batch_size,
            "oom_total": self.oom_total,
            "device_errors_total": self.errors_total,
            "recent_device_errors": self.recent_errors(),
            "device_healthy": self.healthy(),
        }


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

"""Why a request submitted to the batcher gets no embeddings: each reason maps to one HTTP answer."""

from __future__ import annotations

import math
import random


class BatcherError(Exception):
    """Base of the reasons a submitted request does not get embeddings."""


class QueueFull(BatcherError):
    def __init__(self, waiting: int, queue_size: int) -> None:
        self.waiting, self.queue_size = waiting, queue_size
        super().__init__(f"queue full: {waiting} inputs waiting, limit {queue_size}; retry later")


class DeadlineExceeded(BatcherError):
    def __init__(self, deadline_ms: float) -> None:
        self.deadline_ms = deadline_ms
        super().__init__(f"request not completed within its deadline of {deadline_ms:.0f} ms; its work was skipped")


class InputTooLong(BatcherError):
    def __init__(self, index: int, max_tokens: int) -> None:
        self.index, self.max_tokens = index, max_tokens
        super().__init__(f"input[{index}] is longer than the model's limit of {max_tokens} tokens")


class TooManyTokens(BatcherError):
    """The request's inputs hold more tokens than one request may (found while tokenising it)."""

    def __init__(self, tokens: int, limit: int, complete: bool) -> None:
        self.tokens, self.limit, self.complete = tokens, limit, complete
        counted = f"{tokens} tokens" if complete else f"at least {tokens} tokens"
        super().__init__(
            f"the request holds {counted}; at most {limit} are accepted per request (--max-request-tokens): "
            "split it into smaller requests"
        )


class Overloaded(BatcherError):
    """Admission refused: the estimated queue wait would not leave the request time to finish."""

    def __init__(self, estimated_wait_s: float, limit_s: float) -> None:
        self.estimated_wait_s, self.limit_s = estimated_wait_s, limit_s
        # By then the queue seen now has drained; a random extra of up to as much again spreads the retries
        # of clients refused together, so they do not come back as one wave.
        self.retry_after_s = max(1, math.ceil(estimated_wait_s * (1 + random.random())))
        super().__init__(
            f"overloaded: the estimated queue wait is {estimated_wait_s * 1000:.0f} ms, over the "
            f"{limit_s * 1000:.0f} ms this service admits; retry after {self.retry_after_s} s"
        )


class InvalidInput(BatcherError):
    """The tokeniser refused this request's text (the other requests tokenised with it are unaffected)."""


class BatcherStopped(BatcherError):
    def __init__(self) -> None:
        super().__init__("the service is shutting down and accepts no new work")


class ComputeFailed(BatcherError):
    pass


class EngineUnavailable(BatcherError):
    """The engine process ended (or is restarting) while the request waited for it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the inference engine is unavailable ({reason}); retry shortly")


class ShuttingDown(BatcherError):
    """The service is shutting down and the request could not finish within the shutdown grace."""

    def __init__(self) -> None:
        super().__init__("the service is shutting down and could not finish this request in time; retry")

"""The Prometheus metrics of the TEI stub (tests/fakes/tei_stub.py), under text-embeddings-inference's names and
in the text that its exporter (metrics-exporter-prometheus 0.15) writes.

TEI v1.9.3 records them in router/src/lib.rs (ResponseMetadata::record_metrics), router/src/http/server.rs,
core/src/infer.rs, core/src/queue.rs and core/src/tokenization.rs, with the buckets of router/src/prometheus.rs.
Its exporter keeps counter names as recorded (no `_total` suffix), writes a series only once it has been
recorded, and separates metric families by a blank line; the stub does the same.
"""

from __future__ import annotations

import threading

# router/src/prometheus.rs: every metric whose name ends in "duration" (seconds) has 35 geometric buckets
DURATION_BUCKETS_S = tuple(1e-5 * 1.5**k for k in range(1, 36))
BATCH_SIZE_BUCKETS = tuple(2.0**k for k in range(13))
BATCH_TOKENS_BUCKETS = tuple(2.0**k for k in range(21))

# The names, as TEI records them
REQUEST_COUNT = "te_request_count"  # counter {method: single|batch}: requests received
REQUEST_SUCCESS = "te_request_success"  # counter {method}: requests answered 200
REQUEST_FAILURE = (
    "te_request_failure"  # counter {err: validation|batch_size|overloaded|tokenization|model_type|inference}
)
EMBED_COUNT = "te_embed_count"  # counter: inputs embedded (/embed, /embed_sparse), per input
EMBED_SUCCESS = "te_embed_success"
PREDICT_COUNT = "te_predict_count"  # counter: (query, text) pairs scored (/rerank), per pair
PREDICT_SUCCESS = "te_predict_success"
QUEUE_SIZE = "te_queue_size"  # gauge: inputs waiting in the queue for a batch
BATCH_NEXT_SIZE = "te_batch_next_size"  # histogram: inputs per batch sent to the backend
BATCH_NEXT_TOKENS = "te_batch_next_tokens"  # histogram: tokens per batch sent to the backend
INPUT_LENGTH = "te_request_input_length"  # histogram: tokens per input
REQUEST_DURATIONS = (  # histograms, seconds, one observation per successful request (per-input means)
    "te_request_duration",
    "te_request_tokenization_duration",
    "te_request_queue_duration",
    "te_request_inference_duration",
)
EMBED_DURATIONS = (  # histograms, seconds, one observation per input embedded
    "te_embed_duration",
    "te_embed_tokenization_duration",
    "te_embed_queue_duration",
    "te_embed_inference_duration",
)
PREDICT_DURATIONS = (  # histograms, seconds, one observation per pair scored
    "te_predict_duration",
    "te_predict_tokenization_duration",
    "te_predict_queue_duration",
    "te_predict_inference_duration",
)

Labels = tuple[tuple[str, str], ...]


def buckets_for(name: str, max_input_length: int) -> tuple[float, ...]:
    """The bucket bounds TEI's exporter gives a histogram of this name."""
    if name == INPUT_LENGTH:
        return tuple(2.0**k for k in range(20) if 2**k <= max_input_length)
    if name == BATCH_NEXT_SIZE:
        return BATCH_SIZE_BUCKETS
    if name == BATCH_NEXT_TOKENS:
        return BATCH_TOKENS_BUCKETS
    if name.endswith("duration"):
        return DURATION_BUCKETS_S
    raise ValueError(f"no buckets known for {name}")


class _Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
        self.sum += value
        self.count += 1


class TeiMetrics:
    """Counters, gauges and histograms by TEI's names; thread-safe (the stub may serve from several threads)."""

    def __init__(self, max_input_length: int) -> None:
        self.max_input_length = max_input_length
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._gauges: dict[str, float] = {}
        self._histograms: dict[str, _Histogram] = {}

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        with self._lock:
            series = self._counters.setdefault(name, {})
            key = tuple(sorted(labels.items()))
            series[key] = series.get(key, 0.0) + amount

    def add_gauge(self, name: str, delta: float) -> None:
        with self._lock:
            self._gauges[name] = self._gauges.get(name, 0.0) + delta

    def observe(self, name: str, value: float, times: int = 1) -> None:
        with self._lock:
            histogram = self._histograms.get(name)
            if histogram is None:
                histogram = self._histograms[name] = _Histogram(buckets_for(name, self.max_input_length))
            for _ in range(times):
                histogram.observe(value)

    def counter(self, name: str, **labels: str) -> float:
        """A counter's value (0 when never recorded): for tests."""
        with self._lock:
            return self._counters.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        """The exposition text: counters, then gauges, then histograms, each family sorted by name."""
        families: list[str] = []
        with self._lock:
            for name in sorted(self._counters):
                lines = [f"# TYPE {name} counter"]
                lines += [
                    f"{name}{_labels(key)} {_number(v)}" for key, v in sorted(self._counters[name].items())
                ]
                families.append("\n".join(lines))
            for name in sorted(self._gauges):
                families.append(f"# TYPE {name} gauge\n{name} {_number(self._gauges[name])}")
            for name in sorted(self._histograms):
                h = self._histograms[name]
                lines = [f"# TYPE {name} histogram"]
                lines += [f'{name}_bucket{{le="{b}"}} {c}' for b, c in zip(h.bounds, h.counts, strict=True)]
                lines += [
                    f'{name}_bucket{{le="+Inf"}} {h.count}',
                    f"{name}_sum {h.sum}",
                    f"{name}_count {h.count}",
                ]
                families.append("\n".join(lines))
        return "\n\n".join(families) + "\n" if families else ""


def _labels(key: Labels) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in key) + "}" if key else ""


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)

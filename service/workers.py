"""Inference workers: one per serving device (or N on CPU), each with its model replica, one shared queue.

The batcher runs one worker thread per entry and hands each batch to whichever thread is free, so requests
are balanced across devices by construction. The pool stands in for the encoder: `embed_token_ids` runs on
the replica bound to the calling thread, and records that device's busy time and batch count."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import psutil

from modelcore.encoder import Encoder, StopCheck
from service.busy_window import BusyWindow
from service.metrics import ServiceMetrics
from service.settings import DeviceSpec, ServiceSettings

if TYPE_CHECKING:  # the model's module imports torch; the pool only passes models along
    from modelcore.model import EmbeddingModel

log = logging.getLogger("service.workers")
SAMPLE_S = 0.5  # how often a core share reads the host's CPU use
NEIGHBOUR_BUSY_CORES = 0.5  # other processes' use, in cores, above which a lone batch keeps one thread
QUIET_S = 1.0  # a lone batch widens only this long after two batches last ran side by side


def bind_device(spec: DeviceSpec) -> None:
    """Make spec the current device of the calling thread (threads do not inherit the device context)."""
    if spec.kind != "cpu":
        import torch

        getattr(torch, spec.kind).set_device(spec.index)  # torch.cuda, or torch.npu from torch_npu


@dataclass(eq=False)
class DeviceWorker:
    """One serving device: its model replica and the compute spans of the last BUSY_WINDOW_S."""

    spec: DeviceSpec
    encoder: Encoder
    busy: BusyWindow = field(default_factory=BusyWindow)


class CoreShare:
    """Sets each CPU batch's torch threads as it starts: every core for the first worker's batch while it runs
    alone, no two batches ran side by side for QUIET_S and other processes leave the cores idle; else one (a
    team beside a busy core waits at every barrier). Set for each batch under one lock: MKL's thread count is
    global, and a product run at another worker's count starts a second thread team, slowing every team."""

    def __init__(self, cores: int, set_threads: Callable[[int], None]) -> None:
        self.cores, self.in_flight, self.neighbour_cores = cores, 0, 0.0
        self.side_by_side_s = -math.inf  # when two batches last ran side by side (monotonic)
        self._set_threads, self._lock, self._process = set_threads, threading.Lock(), psutil.Process()
        self._last = (time.monotonic(), *self._cpu_s())

    def _cpu_s(self) -> tuple[float, float]:  # the host's busy CPU seconds, and this process's own
        host, own = psutil.cpu_times(), self._process.cpu_times()
        return host.user + host.system + host.nice, own.user + own.system

    def begin(self, may_widen: bool) -> int:  # a batch starts on the calling thread: its threads, now set
        with self._lock:
            self.in_flight += 1
            if (now_s := time.monotonic()) - self._last[0] >= SAMPLE_S:
                (t_s, host_before_s, own_before_s), (host_s, own_s) = self._last, self._cpu_s()
                others_s = (host_s - host_before_s) - (own_s - own_before_s)
                self.neighbour_cores = max(0.0, others_s) / (now_s - t_s)
                self._last = (now_s, host_s, own_s)
            if self.in_flight > 1:
                self.side_by_side_s = now_s
            quiet = now_s - self.side_by_side_s >= QUIET_S and self.neighbour_cores < NEIGHBOUR_BUSY_CORES
            threads = self.cores if may_widen and self.in_flight == 1 and quiet else 1
            self._set_threads(threads)
            return threads

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1


class WorkerPool:
    """The serving devices behind one batcher queue; implements the batcher's Encoder protocol."""

    def __init__(
        self,
        workers: Sequence[DeviceWorker],
        metrics: ServiceMetrics,
        bind: Callable[[DeviceSpec], None] = bind_device,
        share: CoreShare | None = None,
    ) -> None:
        if not workers:
            raise ValueError("a worker pool needs at least one worker")
        self.workers = list(workers)
        self.max_tokens = self.workers[0].encoder.max_tokens
        self.metrics = metrics
        self._bind = bind
        self.share = share
        self._local = threading.local()
        metrics.workers.set(len(self.workers))
        for worker in self.workers:
            label = worker.spec.name
            metrics.device_batches.labels(device=label)
            metrics.device_compute_seconds.labels(device=label)
            metrics.device_busy.labels(device=label).set_function(worker.busy.fraction)

    def __len__(self) -> int:
        return len(self.workers)

    def busy_fractions(self) -> dict[str, float]:
        return {worker.spec.name: round(worker.busy.fraction(), 4) for worker in self.workers}

    def bind_thread(self, index: int) -> None:
        """Run first in worker thread `index`: bind its device; later batches on this thread use its replica."""
        worker = self.workers[index]
        self._bind(worker.spec)
        self._local.worker = worker
        log.debug("worker %d bound to %s", index, worker.spec.name)

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        """With the first replica's tokeniser (the batcher calls it under its tokeniser lock)."""
        return self.workers[0].encoder.tokenize(texts, max_length)

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        """Compute on the calling thread's device (the first one on a thread never bound, e.g. in tests)."""
        worker: DeviceWorker = getattr(self._local, "worker", self.workers[0])
        if (share := self.share) is not None:
            share.begin(may_widen=worker is self.workers[0])
        t_start_s = time.perf_counter()
        try:  # returns after the device has synchronised; a stopped or failed batch kept the device busy too
            return worker.encoder.embed_token_ids(batch, should_stop)
        finally:
            if share is not None:
                share.end()
            t_end_s = time.perf_counter()
            compute_s = t_end_s - t_start_s
            worker.busy.record(t_end_s, compute_s)
            self.metrics.device_batches.labels(device=worker.spec.name).inc()
            self.metrics.device_compute_seconds.labels(device=worker.spec.name).inc(compute_s)

    def warm_up(self, texts: list[str]) -> None:
        """One forward pass per replica, each on a thread bound to its device (graph build, allocator); the
        first failure is raised here once every replica is done."""
        ids = self.tokenize(texts)  # once: concurrent calls of a fast tokeniser fail with "Already borrowed"

        def run(worker: DeviceWorker) -> None:
            self._bind(worker.spec)
            worker.encoder.embed_token_ids(ids)

        with ThreadPoolExecutor(len(self.workers), thread_name_prefix="warm-up") as threads:
            futures = [threads.submit(run, worker) for worker in self.workers]
        for future in futures:
            future.result()


def primary_device(settings: ServiceSettings) -> str:
    """The device the first replica loads on: 'cpu', or the first listed accelerator."""
    spec = settings.device_specs()[0]
    return "cpu" if spec.kind == "cpu" else spec.name


def build_pool(
    settings: ServiceSettings,
    model: EmbeddingModel,
    metrics: ServiceMetrics,
    load: Callable[..., EmbeddingModel],
) -> WorkerPool:
    """One worker per serving device: `model` serves the first, `load` loads a replica for each other. CPU
    workers share `model` unless settings.cpu_worker_replicas: inference never writes the weights, and a copy
    per worker adds memory and load time without adding cores."""
    specs = settings.device_specs()
    workers = [DeviceWorker(specs[0], model)]
    for spec in specs[1:]:
        if spec.kind == "cpu" and not settings.cpu_worker_replicas:
            workers.append(DeviceWorker(spec, model))
            continue
        s, device = settings, "cpu" if spec.kind == "cpu" else spec.name
        path = Path(s.model) if s.model else None
        replica = load(path, device, s.precision, s.engine_threads(), None, s.int8_exclude)
        workers.append(DeviceWorker(spec, replica))
    if len(workers) > 1:
        log.info("%d inference workers: %s", len(workers), ", ".join(s.name for s in specs))
    if len(workers) > 1 and settings.engine_threads() == 1 and all(spec.kind == "cpu" for spec in specs):
        import torch  # the replicas are torch models, already loaded

        return WorkerPool(workers, metrics, share=CoreShare(len(workers), torch.set_num_threads))
    return WorkerPool(workers, metrics)

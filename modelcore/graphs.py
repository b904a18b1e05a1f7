"""Static-shape batches: a few buckets (batch size x padded length), each run as one captured device graph.

A batch is padded to the smallest bucket that holds it (rows of one pad token with a one-position mask fill
the spare rows, which are dropped), so the device sees a handful of shapes only. On cuda each bucket is
captured once as a CUDA graph at warm-up and replayed: one launch per batch instead of one per operator, so
the host no longer limits the device. On npu the same is done with torch_npu's graph API (NPUGraph). On cpu
the buckets let `--compile` (torch.compile) compile each shape once. A batch no bucket holds runs eagerly and
is counted as a miss. Padding rows and positions are masked, and every row is pooled and normalised alone, so
a text's vector does not depend on the bucket or batch that carried it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from embedperf.errors import DeviceError
from modelcore.devices import synchronize

log = logging.getLogger("modelcore.graphs")
LENGTH_BUCKETS = (16, 32, 64, 128, 256, 512)
WARMUP_REPLAYS = 3  # eager runs on the capture stream before capturing (allocator and kernel selection)

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (ids, mask) on the device -> (rows, dim) float


def batch_buckets(max_batch_size: int) -> list[int]:
    """1, 2, 4, ... up to max_batch_size (included even when not a power of two)."""
    powers = {1 << i for i in range(max_batch_size.bit_length()) if 1 << i < max_batch_size}
    return sorted(powers | {max_batch_size})


def bucket_shapes(max_batch_size: int, max_tokens: int, max_batch_tokens: int) -> list[tuple[int, int]]:
    """Every (batch, length) bucket within the batch caps; the longest length is the model's limit."""
    lengths = sorted({length for length in LENGTH_BUCKETS if length < max_tokens} | {max_tokens})
    return [
        (rows, length)
        for rows in batch_buckets(max_batch_size)
        for length in lengths
        if rows * length <= max(max_batch_tokens, length)
    ]


@dataclass
class BucketStats:
    """Hits and misses since start, read by the engine's metrics."""

    hits: int = 0
    misses: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, hit: bool) -> None:
        with self._lock:
            self.hits += hit
            self.misses += not hit


@dataclass(eq=False)
class BucketRunner:
    """Runs batches at bucket shapes: a captured graph per bucket (capture=True), else `step` at the shape."""

    step: Step
    device: torch.device
    shapes: list[tuple[int, int]]
    pad_token_id: int
    dimension: int
    capture: bool
    stats: BucketStats = field(default_factory=BucketStats, init=False)
    graphs: dict[tuple[int, int], _Captured] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.shapes = sorted(self.shapes)
        pinned = self.device.type != "cpu"
        most_rows = max(rows for rows, _ in self.shapes)
        longest = max(length for _, length in self.shapes)
        # host staging buffers, page-locked on accelerators so copies to the device run asynchronously
        self.host_ids = torch.full((most_rows, longest), self.pad_token_id, dtype=torch.long, pin_memory=pinned)
        self.host_mask = torch.zeros((most_rows, longest), dtype=torch.long, pin_memory=pinned)
        self.host_out = torch.empty((most_rows, self.dimension), dtype=torch.float32, pin_memory=pinned)

    def shape_for(self, rows: int, longest: int) -> tuple[int, int] | None:
        """The smallest bucket holding the batch (fewest padded tokens), or None."""
        fitting = [(r * n, (r, n)) for r, n in self.shapes if r >= rows and n >= longest]
        return min(fitting)[1] if fitting else None

    def warm_up(self) -> None:
        """Run (and on accelerators capture) every bucket once: the first requests never pay for it."""
        api = graph_api(self.device) if self.capture else None
        pool = api.runtime.graph_pool_handle() if api is not None else None
        for rows, length in sorted(self.shapes, reverse=True):  # largest first: later ones reuse its memory
            ids = torch.full((rows, length), self.pad_token_id, dtype=torch.long, device=self.device)
            mask = torch.zeros((rows, length), dtype=torch.long, device=self.device)
            mask[:, 0] = 1
            if api is None:
                self.step(ids, mask)
                continue
            self.graphs[(rows, length)] = api.capture(self.step, ids, mask, pool)
        if api is not None:
            synchronize(self.device)
            log.info("captured %d device graphs (batch x length buckets)", len(self.graphs))

    def run(self, batch: list[list[int]]) -> np.ndarray | None:
        """Vectors of batch (float32, len(batch) x dimension), or None when no bucket holds it."""
        rows, longest = len(batch), max(len(ids) for ids in batch)
        shape = self.shape_for(rows, longest)
        self.stats.record(hit=shape is not None)
        if shape is None:
            return None
        bucket_rows, length = shape
        ids, mask = self.host_ids[:bucket_rows, :length], self.host_mask[:bucket_rows, :length]
        ids.fill_(self.pad_token_id)
        mask.zero_()
        mask[:, 0] = 1  # spare rows: one masked-in pad token, so no row is all padding
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = torch.as_tensor(tokens, dtype=torch.long)
            mask[row, : len(tokens)] = 1
        captured = self.graphs.get(shape)
        out = self.host_out[:rows]
        if captured is not None:
            captured.ids.copy_(ids, non_blocking=True)
            captured.mask.copy_(mask, non_blocking=True)
            captured.graph.replay()
            captured.event.record()
            out.copy_(captured.output[:rows], non_blocking=True)
            captured.event.synchronize()  # the batch's one wait, after its copy back is queued
        else:
            device_ids = ids.to(self.device, non_blocking=True)
            device_mask = mask.to(self.device, non_blocking=True)
            out.copy_(self.step(device_ids, device_mask)[:rows])
            synchronize(self.device)
        return out.numpy().copy()


@dataclass
class _Captured:
    """One bucket's graph with its static input and output tensors."""

    graph: Any
    ids: torch.Tensor
    mask: torch.Tensor
    output: torch.Tensor
    event: Any


@dataclass(frozen=True)
class GraphApi:
    """The graph calls of one accelerator runtime (torch.cuda, or torch.npu from torch_npu)."""

    runtime: Any
    graph_class: Any
    graph_context: Any

    @torch.inference_mode()
    def capture(self, step: Step, ids: torch.Tensor, mask: torch.Tensor, pool: Any) -> _Captured:
        stream = self.runtime.Stream()
        stream.wait_stream(self.runtime.current_stream())
        with self.runtime.stream(stream):  # warm-up runs off the default stream, as capture requires
            for _ in range(WARMUP_REPLAYS):
                step(ids, mask)
        self.runtime.current_stream().wait_stream(stream)
        graph = self.graph_class()
        with self.graph_context(graph, pool=pool):
            output = step(ids, mask)
        return _Captured(graph, ids, mask, output, self.runtime.Event())


def graph_api(device: torch.device) -> GraphApi:
    """The graph API of device's runtime; a clear error where it has none."""
    if device.type == "cuda":
        return GraphApi(torch.cuda, torch.cuda.CUDAGraph, torch.cuda.graph)
    if device.type == "npu":
        npu = getattr(torch, "npu", None)
        graph_class = getattr(npu, "NPUGraph", None)
        context = getattr(npu, "graph", None)
        if npu is None or graph_class is None or context is None:
            raise DeviceError(
                "this torch_npu has no graph mode (torch.npu.NPUGraph); upgrade torch_npu or serve with --graphs off"
            )
        return GraphApi(npu, graph_class, context)
    raise DeviceError(f"device graphs need cuda or npu, not {device.type}; use --graphs off (or --compile on cpu)")

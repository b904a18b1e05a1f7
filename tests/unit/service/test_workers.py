"""Serving devices: the device list, one worker thread per device bound inside its thread, per-device metrics."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from embedperf.errors import ConfigError
from modelcore.encoder import StopCheck
from service.batch_job import BatcherConfig
from service.batcher import Batcher
from service.cli import settings_from_args
from service.metrics import ServiceMetrics
from service.settings import DeviceSpec, ServiceSettings
from service.workers import DeviceWorker, WorkerPool, build_pool, primary_device


class BarrierEncoder:
    """Computes only when the other device computes at the same time: proves the two workers run in parallel."""

    max_tokens = 16

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier
        self.batches = 0
        self.threads: set[str] = set()

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        return [[101, len(text), 102] for text in texts]

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        self.barrier.wait()
        self.batches += 1
        self.threads.add(threading.current_thread().name)
        return np.array([[float(ids[1]), 1.0] for ids in batch], dtype=np.float32)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "npu:0,cuda:1"], "mixes kinds (cuda, npu)"),
        (["--device", "npu:0,npu:0"], "names npu:0 more than once"),
        (["--device", "npu,npu:0"], "names npu:0 more than once"),
        (["--device", "npu:0,,npu:1"], "has an empty entry"),
        (["--device", "gpu:0"], "is not one of cpu, cuda[:N], npu[:N]"),
        (["--device", "npu:x"], "is not one of cpu, cuda[:N], npu[:N]"),
        (["--device", "cpu:1"], "use --workers N"),
        (["--device", "cuda:0", "--workers", "2"], "--workers 2 applies to CPU only"),
    ],
)
def test_bad_device_lists_are_refused_with_what_to_do(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_args(argv)
    assert message in str(info.value)
    assert ": :" not in str(info.value)  # model-level problems read as one clean sentence


def test_device_lists_name_devices_as_npu_smi_and_nvml_number_them() -> None:
    npus = ServiceSettings(device="npu:3, npu:5").device_specs()
    assert [s.as_info() for s in npus] == [
        {"kind": "npu", "index": 3, "name": "npu:3"},
        {"kind": "npu", "index": 5, "name": "npu:5"},
    ]
    assert [s.name for s in ServiceSettings(device="cuda").device_specs()] == ["cuda:0"]
    assert [s.name for s in ServiceSettings(workers=3).device_specs()] == ["cpu:0", "cpu:1", "cpu:2"]
    assert primary_device(ServiceSettings(device="npu:3,npu:5")) == "npu:3"
    assert primary_device(ServiceSettings(workers=2)) == "cpu"


def test_one_replica_per_accelerator_and_cpu_workers_share_unless_asked() -> None:
    loads: list[tuple[Any, ...]] = []
    model = SimpleNamespace(max_tokens=16)

    def fake_load(*args: Any) -> object:
        loads.append(args)
        return SimpleNamespace(max_tokens=16)

    settings = ServiceSettings(device="npu:2,npu:6", precision="fp16")
    pool = build_pool(settings, model, ServiceMetrics(), load=fake_load)  # type: ignore[arg-type]
    assert [w.spec.name for w in pool.workers] == ["npu:2", "npu:6"]
    assert pool.workers[0].encoder is model and pool.workers[1].encoder is not model
    assert [(a[1], a[2]) for a in loads] == [("npu:6", "fp16")]  # only the second device loads a replica

    loads.clear()
    shared = build_pool(ServiceSettings(workers=2), model, ServiceMetrics(), load=fake_load)  # type: ignore[arg-type]
    assert [w.encoder for w in shared.workers] == [model, model] and loads == []
    copies = build_pool(
        ServiceSettings(workers=2, cpu_worker_replicas=True),
        model,  # type: ignore[arg-type]
        ServiceMetrics(),
        load=fake_load,
    )
    assert copies.workers[1].encoder is not model and [a[1] for a in loads] == ["cpu"]


def test_two_workers_compute_in_parallel_each_bound_to_its_device_in_its_own_thread() -> None:
    barrier = threading.Barrier(2, timeout=20)
    encoders = [BarrierEncoder(barrier), BarrierEncoder(barrier)]
    specs = [DeviceSpec("npu", 0, "npu:0"), DeviceSpec("npu", 1, "npu:1")]
    bound: list[tuple[str, str]] = []

    def bind(spec: DeviceSpec) -> None:
        bound.append((spec.name, threading.current_thread().name))

    metrics = ServiceMetrics()
    pool = WorkerPool([DeviceWorker(s, e) for s, e in zip(specs, encoders, strict=True)], metrics, bind)
    batcher = Batcher(
        pool, BatcherConfig(batching=False, workers=2), metrics, on_worker_start=pool.bind_thread
    )

    async def go() -> list[Any]:
        batcher.start()
        try:
            return await asyncio.gather(*(batcher.submit([f"text {'x' * i}"], 20_000) for i in range(4)))
        finally:
            await asyncio.to_thread(batcher.stop, 20.0)

    results = asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert [r.embeddings[0][0] for r in results] == [5.0, 6.0, 7.0, 8.0]  # each answer is its own input's
    assert sorted(bound) == [("npu:0", "embed-worker-0"), ("npu:1", "embed-worker-1")]
    assert encoders[0].threads == {"embed-worker-0"} and encoders[1].threads == {"embed-worker-1"}
    assert encoders[0].batches == encoders[1].batches == 2  # the barrier pairs one batch from each device
    text = metrics.render().decode()
    assert 'embedperf_device_batches_total{device="npu:0"} 2.0' in text
    assert 'embedperf_device_batches_total{device="npu:1"} 2.0' in text
    assert "embedperf_workers 2.0" in text
    assert set(pool.busy_fractions()) == {"npu:0", "npu:1"}
    assert all(worker.busy.fraction() > 0 for worker in pool.workers)
    assert 0 < batcher.busy_fraction() <= 1  # the overall figure is the mean over devices, not their sum


def test_bind_device_sets_the_threads_device_and_leaves_cpu_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from service import workers

    calls: list[tuple[str, int]] = []

    class FakeNpu:
        @staticmethod
        def set_device(index: int) -> None:
            calls.append(("npu", index))

    monkeypatch.setattr(torch, "npu", FakeNpu, raising=False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: calls.append(("cuda", index)))
    workers.bind_device(DeviceSpec("npu", 5, "npu:5"))
    workers.bind_device(DeviceSpec("cuda", 1, "cuda:1"))
    workers.bind_device(DeviceSpec("cpu", 1, "cpu:1"))
    assert calls == [("npu", 5), ("cuda", 1)]


def test_a_lone_batch_of_the_first_worker_takes_every_core_only_while_nothing_runs_beside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service import workers

    monkeypatch.setattr(workers, "SAMPLE_S", 3600.0)  # the neighbour figure stays what the test sets
    monkeypatch.setattr(workers, "QUIET_S", 0.2)
    calls: list[int] = []
    share = workers.CoreShare(2, set_threads=calls.append)
    assert share.begin(may_widen=True) == 2  # alone, quiet, no neighbour
    share.end()
    assert share.begin(may_widen=False) == 1  # only the first worker's team widens
    share.end()
    assert share.begin(may_widen=True) == 2
    assert share.begin(may_widen=False) == 1  # a second batch beside it
    share.end()
    share.end()
    assert share.begin(may_widen=True) == 1  # alone again, but two ran side by side less than QUIET_S ago
    share.end()
    threading.Event().wait(0.25)
    assert share.begin(may_widen=True) == 2
    share.end()
    share.neighbour_cores = 1.0  # another process keeps a core busy
    assert share.begin(may_widen=True) == 1
    share.end()
    assert calls == [2, 1, 2, 1, 1, 2, 1]  # set for every batch: MKL's count is global to the process
    assert share.in_flight == 0


class ThreadsEncoder:
    """Records which worker thread computed each batch; a batch whose text's length is a key of `holds` waits
    for that event (and sets its `started` event first)."""

    max_tokens = 16

    def __init__(self, *held_lengths: int) -> None:
        self.threads: list[str] = []
        self.holds = {n: threading.Event() for n in held_lengths}
        self.started = {n: threading.Event() for n in held_lengths}

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        return [[101, len(text), 102] for text in texts]

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        if (length := batch[0][1]) in self.holds:
            self.started[length].set()
            assert self.holds[length].wait(20)
        return np.array([[float(ids[1]), 1.0] for ids in batch], dtype=np.float32)


FIRST_HELD, OTHER_HELD = "held by the first worker", "held by the other worker, a longer text"


def test_the_first_worker_takes_each_batch_while_it_is_free_and_the_others_take_what_it_cannot() -> None:
    encoder = ThreadsEncoder(len(FIRST_HELD), len(OTHER_HELD))
    specs = [DeviceSpec("cpu", 0, "cpu:0"), DeviceSpec("cpu", 1, "cpu:1")]
    metrics = ServiceMetrics()
    pool = WorkerPool([DeviceWorker(s, encoder) for s in specs], metrics, bind=lambda spec: None)
    config = BatcherConfig(batching=False, workers=2, first_worker_first=True)
    batcher = Batcher(pool, config, metrics, on_worker_start=pool.bind_thread)

    async def held(text: str) -> asyncio.Future[Any]:
        answer = asyncio.ensure_future(batcher.submit([text], 20_000))
        assert await asyncio.to_thread(encoder.started[len(text)].wait, 20)
        return answer

    async def go() -> None:
        batcher.start()
        try:
            for _ in range(50):  # until the first worker has started and computed once (threads start in any order)
                await batcher.submit(["w"], 20_000)
                if encoder.threads[-1] == "embed-worker-0":
                    break
            encoder.threads.clear()
            a = await held(FIRST_HELD)  # the first worker takes it while free
            b = await held(OTHER_HELD)  # the other takes what the first cannot
            encoder.holds[len(FIRST_HELD)].set()
            await a
            encoder.holds[len(OTHER_HELD)].set()  # the other finishes while the first is free
            await b
            for i in range(6):  # one at a time: each finds the first worker free
                await batcher.submit([f"t{i}"], 20_000)
        finally:
            await asyncio.to_thread(batcher.stop, 20.0)

    asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert encoder.threads == ["embed-worker-0", "embed-worker-1"] + ["embed-worker-0"] * 6

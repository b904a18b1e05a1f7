"""The service's process layout under failure: an engine process killed mid-batch, a front end killed, the
front ends' tokeniser against the model's own, and /info naming the layout."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import time
from pathlib import Path

import httpx
import psutil

from modelcore.model import load_model
from modelcore.model_folder import default_model_path
from service.tokenize_stage import FrontTokenizer
from tests.conftest import start_service, stop_process

MODEL = "all-MiniLM-L6-v2"
WAIT_S = 120.0  # bound of every wait for an event below (a busy 2-core host restarts an engine in ~10 s)


def wait_for(predicate: object, timeout_s: float = WAIT_S) -> None:
    deadline_s = time.monotonic() + timeout_s
    while time.monotonic() < deadline_s:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s")


def ready(url: str) -> int:
    return httpx.get(f"{url}/ready", timeout=10).status_code


def post(url: str, inputs: int, timeout_s: float = 60) -> tuple[int, dict[str, object], float]:
    t_start_s = time.monotonic()
    body = {"model": MODEL, "input": [f"request text number {i} " * 30 for i in range(inputs)]}
    response = httpx.post(f"{url}/v1/embeddings", json=body, timeout=timeout_s)
    assert response.headers["content-type"] == "application/json"
    return response.status_code, response.json(), time.monotonic() - t_start_s


def test_an_engine_killed_mid_batch_answers_503_at_once_then_the_service_recovers(tmp_path: Path) -> None:
    proc, url = start_service(
        ["--http-workers", "1", "--deadline-ms", "60000", "--admit-wait-share", "1.0"],
        tmp_path / "svc.log",
    )
    try:
        info = httpx.get(f"{url}/info", timeout=10).json()
        engine_pid = info["engine_pid"]
        assert engine_pid not in (0, proc.pid, info["pid"]) and info["http_workers"] == 1
        # the front end runs as a batch task (its wake-ups do not preempt the engine's workers), the engine does not
        assert os.sched_getscheduler(info["pid"]) == os.SCHED_BATCH != os.sched_getscheduler(engine_pid)
        assert cpus_of(info["pid"]) == set(os.sched_getaffinity(0))  # on cpu: placed by the kernel (auto)
        with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
            futures = [pool.submit(post, url, 32) for _ in range(12)]
            wait_for(lambda: httpx.get(f"{url}/health", timeout=10).json()["queue_depth"] > 0)
            os.kill(engine_pid, signal.SIGKILL)
            outcomes = [future.result() for future in futures]
        failed = [(status, body, took_s) for status, body, took_s in outcomes if status != 200]
        assert failed, "every request finished before the engine was killed"
        for status, body, took_s in failed:  # answered when the engine ended, not at the 60 s deadline
            assert status == 503 and body["error"]["code"] == "engine_unavailable", body  # type: ignore[index]
            assert took_s < 30
        wait_for(lambda: ready(url) == 200)  # the supervisor started a new engine
        assert httpx.get(f"{url}/info", timeout=10).json()["engine_pid"] != engine_pid
        assert post(url, 2)[0] == 200
    finally:
        stop_process(proc)
    log = (tmp_path / "svc.log").read_text()
    assert "the engine process" in log and "starting it again" in log


def cpus_of(pid: int) -> set[int]:
    """The CPUs a process's threads may run on (all of its threads alike)."""
    per_thread = {frozenset(os.sched_getaffinity(int(thread_id))) for thread_id in os.listdir(f"/proc/{pid}/task")}
    assert len(per_thread) == 1, per_thread
    return set(next(iter(per_thread)))


def test_a_front_end_killed_leaves_the_others_serving(tmp_path: Path) -> None:
    proc, url = start_service(["--http-workers", "2", "--pin-front-ends", "on"], tmp_path / "svc.log")
    try:
        info = httpx.get(f"{url}/info", timeout=10).json()
        children = psutil.Process(proc.pid).children()
        engine = info["engine_pid"]
        fronts = [c.pid for c in children if c.pid != engine and "resource_tracker" not in c.cmdline()[-1]]
        usable = sorted(os.sched_getaffinity(0))
        last_two = usable[-2:] if len(usable) > 1 else usable * 2
        # each front end's threads on one CPU, the front ends on the last usable ones
        assert sorted(cpu for pid in fronts for cpu in cpus_of(pid)) == last_two
        assert cpus_of(info["engine_pid"]) == set(usable)  # the engine is not pinned
        victim = info["pid"]
        os.kill(victim, signal.SIGKILL)
        statuses = [post(url, 1)[0] for _ in range(20)]  # new connections: whichever front end accepts them
        assert statuses == [200] * 20
        wait_for(lambda: "front end" in (tmp_path / "svc.log").read_text())
    finally:
        stop_process(proc)
    assert "starting it again" in (tmp_path / "svc.log").read_text()


def test_the_front_ends_tokenise_exactly_as_the_model() -> None:
    minilm = load_model()
    texts = [
        "Capacity planning needs the P99 at every step.",
        "预热：深度学习模型推理性能测试",
        "  spaces,   punctuation!? and ÜNICODE ",
        "word " * 400,  # truncated at the model's limit
        "",
    ]
    front = FrontTokenizer(default_model_path(), minilm.max_tokens, truncate=True)
    assert front.token_ids(texts, 0) == minilm.tokenize(texts)

"""Fixtures for every test package: the npu-smi samples (tests/fixtures) and a real reference service."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from embedperf.cache_folder import CACHE_ENV
from loadgen.processes.child import stop_child
from loadgen.processes.service_proc import RAMP_SERVICE_ARGS, ServiceProcess
from loadgen.processes.service_proc import free_port as free_port  # re-exported for tests
from tests.peers import shared as shared_peers
from tests.peers.fixtures import PEER_FIXTURES
from tests.peers.fixtures import infinity_server as infinity_server  # shared with every test package
from tests.peers.fixtures import infinity_vllm_style_server as infinity_vllm_style_server
from tests.peers.fixtures import kserve_server as kserve_server

# Every torch the tests start (the reference service, the peer servers, a precision check in a test
# process) computes on one thread. Left to its own choice each takes one thread per core, and on a
# 2-core host running several of them at once the threads oversubscribe the cores and spin waiting
# for each other: measured over the whole suite, 19% more CPU for the same tests. Set before any test
# imports torch or starts a process; a value already in the environment is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The fp32 reference vectors (study.reference_vectors) are cached for this test session only: the
# first test that needs them computes them, as a user's first `embedperf precision` would, and
# nothing is read from or left in the home folder's cache.
OWN_CACHE_DIR = pytest.StashKey[Path]()


# The peer servers are shared by every worker of the session and stopped by the session that made their
# folder, after the last test (tests/peers/shared.py).
OWN_PEERS_DIR = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Runs in the xdist controller before its workers start: they inherit the cache and peers folders."""
    if CACHE_ENV not in os.environ:
        config.stash[OWN_CACHE_DIR] = Path(tempfile.mkdtemp(prefix="embedperf-test-cache-"))
        os.environ[CACHE_ENV] = str(config.stash[OWN_CACHE_DIR])
    peers_dir = shared_peers.open_session()
    if peers_dir is not None:
        config.stash[OWN_PEERS_DIR] = peers_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    if OWN_PEERS_DIR in config.stash:
        shared_peers.close_session(config.stash[OWN_PEERS_DIR])
    if OWN_CACHE_DIR in config.stash:
        shutil.rmtree(config.stash[OWN_CACHE_DIR], ignore_errors=True)


REPO_ROOT = Path(__file__).resolve().parents[1]
NPU_SMI_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "npu-smi"
SERVICE_READY_TIMEOUT_S = 180.0


@pytest.fixture(scope="session")
def npu_smi_fixtures() -> Path:
    assert NPU_SMI_FIXTURES.is_dir(), f"npu-smi samples missing at {NPU_SMI_FIXTURES}"
    return NPU_SMI_FIXTURES


def start_service(extra_args: list[str], log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start `python -m service` on a free loopback port and wait for /ready. Caller stops it."""
    service = ServiceProcess(extra_args, log_path=log_path, ready_timeout_s=SERVICE_READY_TIMEOUT_S).start()
    assert service.proc is not None
    return service.proc, service.url


@contextmanager
def uvicorn_in_thread(config: Any) -> Iterator[tuple[str, int]]:
    """A real uvicorn server run from `config` (a uvicorn.Config; give it port 0) in a thread: (host, port)."""
    import uvicorn

    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def python_json(*args: str, timeout_s: float = 120, env: dict[str, str] | None = None) -> Any:
    """Run `python ARGS` in a fresh interpreter from the repository root (a Locust or gevent process of its
    own), require exit 0 and return the JSON object its last output line prints."""
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    stop_child(proc, grace_s)


@pytest.fixture(scope="session")
def reference_service_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared reference service's output: its own log and its JSON access log (stderr by default)."""
    return tmp_path_factory.mktemp("service") / "service.log"


@pytest.fixture(scope="session")
def reference_service(reference_service_log: Path) -> Iterator[str]:
    """The real reference service (MiniLM on CPU, batching on), shared by the whole session.

    It queues rather than sheds, as `embedperf bench` starts it: the tests that share it measure the load
    side, and a host busy with other tests must not turn their requests into 429s."""
    with ServiceProcess(
        list(RAMP_SERVICE_ARGS), log_path=reference_service_log, ready_timeout_s=SERVICE_READY_TIMEOUT_S
    ) as service:
        yield service.url


TESTS_DIR = REPO_ROOT / "tests"
PROCESS_FIXTURES = frozenset({"reference_service"}) | PEER_FIXTURES  # fixtures that start a process or load a model


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sort every test into a tier by where it lives, so a new test lands in the right one unmarked.

    `make test-quick` (-m "not slow and not browser") is the edit-test loop: tests/unit, and the
    integration tests marked `quick` because they start no process. Everything under tests/e2e and
    tests/integration, and any test that uses the reference service, is `slow`: `make test` runs it.
    A unit test that starts a process (make, locust, a CLI) carries an explicit `slow` marker.
    """
    for item in items:
        parts = item.path.relative_to(TESTS_DIR).parts if item.path.is_relative_to(TESTS_DIR) else ()
        tier = parts[0] if parts else ""
        needs_process = bool(PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())))
        unmarked_integration = tier == "integration" and item.get_closest_marker("quick") is None
        if tier == "e2e" or needs_process or unmarked_integration:
            item.add_marker(pytest.mark.slow)
    # The longest modules first, then the other end-to-end ones, the other slow ones, the quick ones.
    # `make test` hands out whole modules in this order to whichever worker is free (--dist loadscope
    # --no-loadscope-reorder), so the short unit tests fill the gaps at the end instead of one worker
    # running the last long module alone.
    items.sort(key=start_order)


# The modules that take over a minute each on a 2-core host, longest first.
LONGEST_MODULES: tuple[str, ...] = (
    "e2e/test_canary_e2e.py",
    "e2e/test_target_protocols_e2e.py",
    "e2e/test_verify_e2e.py",
    "e2e/test_search_e2e.py",
    "integration/loadgen/test_distributed_runs.py",
)


def start_order(item: pytest.Item) -> int:
    module = "/".join(item.path.relative_to(TESTS_DIR).parts) if item.path.is_relative_to(TESTS_DIR) else ""
    if module in LONGEST_MODULES:
        return LONGEST_MODULES.index(module)
    tier = 0 if _tier(item) == "e2e" else 1 if item.get_closest_marker("slow") else 2
    return len(LONGEST_MODULES) + tier


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not even import the test modules a mark expression can select nothing from.

    make test-quick (`not slow`): tests/e2e, and tests/integration modules with no `pytest.mark.quick` in
    their text; their imports (torch, the openai client, Locust) were a third of each quick worker's
    collection. make test's solo phase (`solo`): every module with no `pytest.mark.solo` in its text."""
    markexpr = (config.option.markexpr or "").strip()
    if collection_path.suffix != ".py" or collection_path.name == "conftest.py":
        return None
    if not collection_path.is_relative_to(TESTS_DIR):
        return None
    if markexpr == "solo":
        return "pytest.mark.solo" not in collection_path.read_text("utf-8") or None
    if "not slow" not in markexpr:
        return None
    tier = collection_path.relative_to(TESTS_DIR).parts[0]
    if tier == "e2e" or (tier == "integration" and "pytest.mark.quick" not in collection_path.read_text("utf-8")):
        return True
    return None


def _tier(item: pytest.Item) -> str:
    parts = item.path.relative_to(TESTS_DIR).parts if item.path.is_relative_to(TESTS_DIR) else ()
    return parts[0] if parts else ""

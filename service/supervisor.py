"""`embedperf serve`'s process layout: one engine process (the model and its batcher) and N HTTP front ends
on one port (each binds it with SO_REUSEPORT; the kernel spreads the connections), started, watched and
stopped here.

A front end that ends unasked is started again (the others serve meanwhile, on the same socket). An engine that
ends unasked is marked down in the status block, so every front end answers its waiting requests 503 and /ready
503 at once, and is started again up to --engine-restarts times; then the service exits with status 3. On
SIGTERM or SIGINT the front ends drain first (requests still running when the grace is about to end are
answered a JSON 503), then the engine stops. A front end runs the service's app (service/app.py) on the port
(service/http_server.py), linked to the engine process (service/engine_client.py)."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

import uvloop
from prometheus_client import multiprocess

from service.app import build_app
from service.engine_client import RemoteEngine
from service.engine_entry import engine_main
from service.engine_status import EngineState, Slot, StatusBlock
from service.http_server import reserve_port, serve
from service.metrics import MULTIPROC_ENV, ServiceMetrics
from service.settings import ServiceSettings
from service.state import ServiceState

log = logging.getLogger("service.supervisor")
WATCH_INTERVAL_S = 0.2
ENGINE_STOP_S = 5.0  # the engine's queue is empty once the front ends have drained: it ends within this
DRAIN_MARGIN_S = 0.5  # requests still running this long before the grace ends are answered 503
EXIT_INCOMPLETE = 3
PARENT_CHECK_S = 0.5
FRONT_END_NICE = 5  # relative to the engine process, which keeps the niceness it was started with


class Supervisor:
    def __init__(self, settings: ServiceSettings) -> None:
        with_workers = settings.model_copy(update={"workers": settings.engine_workers()})
        resolved = {"threads": with_workers.engine_threads(), "http_workers": settings.front_end_count()}
        self.port_holder = reserve_port(settings.host, settings.port)  # port 0: the one the kernel chose
        resolved["port"] = self.port_holder.getsockname()[1]
        self.settings = with_workers.model_copy(update=resolved)  # /info shows what runs, not "auto"
        self.runtime = Path(tempfile.mkdtemp(prefix="embedperf-serve-"))
        self.endpoint = f"ipc://{self.runtime / 'engine.sock'}"
        self.status_path = self.runtime / "status"
        self.status = StatusBlock.create(self.status_path)
        self.context = multiprocessing.get_context("spawn")
        self.engine: BaseProcess | None = None
        self.generation = 0
        self.restarts_left = settings.engine_restarts
        self.fronts: dict[int, BaseProcess] = {}
        self.stopping = False

    def run(self) -> int:
        metrics_dir = self.runtime / "metrics"
        metrics_dir.mkdir()
        os.environ[MULTIPROC_ENV] = str(metrics_dir)  # the children's /metrics add up every process's figures
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._start_engine()
            for index in range(self.settings.front_end_count()):
                self._start_front(index)
            s, engine_pid = self.settings, self.engine.pid if self.engine else "?"
            shown = (s.host, s.port, len(self.fronts), engine_pid, s.threads)
            log.info("serving on http://%s:%d: %d HTTP front end(s), engine pid %s (%d torch threads)", *shown)
            code = self._watch()
            self._shut_down()
            log.info("stopped")
            return code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.environ.pop(MULTIPROC_ENV, None)
            self.port_holder.close()
            self.status.close()
            shutil.rmtree(self.runtime, ignore_errors=True)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _spawn(self, main: Callable[..., None], number: int, name: str) -> BaseProcess:
        """Start a child running main(settings, endpoint, status path, number)."""
        args = (self.settings, self.endpoint, str(self.status_path), number)
        process = self.context.Process(target=main, args=args, name=name)
        process.start()
        return process

    def _start_engine(self) -> None:
        self.generation += 1
        self.engine = self._spawn(engine_main, self.generation, "embedperf-engine")

    def _start_front(self, index: int) -> None:
        self.fronts[index] = self._spawn(frontend_main, index, f"embedperf-http-{index}")

    def _watch(self) -> int:
        """Until asked to stop: restart what ended. Returns the exit status the service ends with."""
        while not self.stopping:
            sentinels = [p.sentinel for p in (self.engine, *self.fronts.values()) if p is not None]
            multiprocessing.connection.wait(sentinels, timeout=WATCH_INTERVAL_S)
            if self.stopping:
                break
            engine = self.engine
            if engine is not None and not engine.is_alive():
                code = self._engine_ended(engine)
                if code is not None:
                    return code
            for index, front in list(self.fronts.items()):
                if not front.is_alive() and not self.stopping:
                    shown = (index, front.pid, front.exitcode)
                    log.error("HTTP front end %d (pid %s) ended with %s; starting it again", *shown)
                    mark_process_dead(front.pid)
                    self._start_front(index)
        return 0

    def _engine_ended(self, engine: BaseProcess) -> int | None:
        mark_process_dead(engine.pid)
        if self.status.state == EngineState.FAILED:  # it could not load: starting it again would not help
            failure = self.status.read_document().get("failure", "unknown")
            print(f"embedperf serve: error: {failure}", file=sys.stderr, flush=True)
            return int(self.status.read_document().get("exit_code", 2))
        self.status.set(Slot.STATE, EngineState.DOWN)
        if self.restarts_left <= 0:
            log.error("the engine process ended with %s and no restart is left; the service stops", engine.exitcode)
            return EXIT_INCOMPLETE
        self.restarts_left -= 1
        shown = (engine.pid, engine.exitcode, self.restarts_left)
        log.error("the engine process (pid %s) ended with %s; starting it again (%d restart(s) left)", *shown)
        self._start_engine()
        return None

    def _shut_down(self) -> None:
        grace_s = self.settings.shutdown_grace_s
        self.status.set(Slot.DRAIN_DEADLINE_S, time.monotonic() + max(0.0, grace_s - DRAIN_MARGIN_S))
        self.status.set(Slot.DRAINING, 1)
        fronts = list(self.fronts.values())
        for front in fronts:
            front.terminate()  # SIGTERM, unless it has ended already
        deadline_s = time.monotonic() + grace_s + 1
        for front in fronts:
            join_or_kill(front, deadline_s - time.monotonic())
        if self.engine is not None:
            self.engine.terminate()
            join_or_kill(self.engine, ENGINE_STOP_S)


def join_or_kill(process: BaseProcess, timeout_s: float) -> None:
    """Wait up to timeout_s for process to end, then kill it."""
    process.join(max(0.0, timeout_s))
    if process.is_alive():
        process.kill()
        process.join()
    mark_process_dead(process.pid)


def mark_process_dead(pid: int | None) -> None:
    """Drop a dead process's live gauges from the metrics folder (prometheus_client's multiprocess mode)."""
    if pid is not None and MULTIPROC_ENV in os.environ:
        multiprocess.mark_process_dead(pid)  # reads the folder from the environment, set by run()


def frontend_main(settings: ServiceSettings, endpoint: str, status_path: str, index: int) -> None:
    """Entry point of front end `index` (multiprocessing, spawn). On SIGTERM/SIGINT the requests in flight
    finish (those the grace cuts off are answered 503 by the engine link), then the process ends."""
    # The front ends yield the CPU to the engine, whose compute is the goodput (under overload they answer
    # thousands of refusals a second); as batch tasks their many short wake-ups do not preempt its workers.
    with contextlib.suppress(OSError, AttributeError):  # SCHED_BATCH is Linux's
        os.nice(FRONT_END_NICE)
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    settings.log_to_stderr(f"http[{index}] ")
    if settings.front_ends_pinned():
        pin_to_one_cpu(index)
    metrics = ServiceMetrics()
    engine = RemoteEngine(settings, endpoint, Path(status_path), metrics)
    app = build_app(ServiceState(settings=settings, engine=engine, metrics=metrics, freeze_heap=True))
    watch_parent(os.getppid())
    uvloop.run(serve(settings, app))
    logging.shutdown()
    os._exit(0)  # the server's runtime threads need no teardown


def pin_to_one_cpu(index: int) -> None:
    """Keep this process's threads, and those it starts from now on, on one usable CPU: the index-th from the
    last (front end i on CPU n-1-i, wrapping around)."""
    with contextlib.suppress(AttributeError, OSError):  # Linux's
        cpus = sorted(os.sched_getaffinity(0))
        cpu = {cpus[-1 - index % len(cpus)]}
        for thread_id in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(thread_id), cpu)
        log.info("front end %d runs on CPU %d", index, *cpu)


def watch_parent(parent_pid: int) -> None:
    """Shut this front end down gracefully (as SIGTERM does) once the supervisor is gone."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            threading.Event().wait(PARENT_CHECK_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()

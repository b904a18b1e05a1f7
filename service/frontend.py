"""A front-end process: the service's app (HTTP, auth, admission, tokenising, JSON) on the port every front
end binds (service/http_server.py), linked to the engine process (service/engine_client.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import uvloop

from service.app import build_app
from service.engine_client import RemoteEngine
from service.http_server import serve
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings
from service.state import ServiceState

PARENT_CHECK_S = 0.5
FRONT_END_NICE = 5  # relative to the engine process, which keeps the niceness it was started with


def frontend_main(settings: ServiceSettings, endpoint: str, status_path: str, index: int) -> None:
    """Entry point of front end `index` (multiprocessing, spawn). On SIGTERM/SIGINT the requests in flight
    finish (those the grace cuts off are answered 503 by the engine link), then the process ends."""
    # Under overload the front ends answer thousands of refusals a second: they yield the CPU to the engine,
    # whose compute is the goodput, rather than taking it from it.
    with contextlib.suppress(OSError):
        os.nice(FRONT_END_NICE)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s http[{index}] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    metrics = ServiceMetrics()
    engine = RemoteEngine(settings, endpoint, Path(status_path), metrics)
    app = build_app(ServiceState(settings=settings, engine=engine, metrics=metrics, freeze_heap=True))
    watch_parent(os.getppid())
    uvloop.run(serve(settings, app))
    logging.shutdown()
    os._exit(0)  # the server's runtime threads need no teardown


def watch_parent(parent_pid: int) -> None:
    """Shut this front end down gracefully (as SIGTERM does) once the supervisor is gone."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            threading.Event().wait(PARENT_CHECK_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()

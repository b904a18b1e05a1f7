"""Distributed mode: workers forward row batches to the master, which writes the one run folder.

Workers send `embedperf_rows` at least every FORWARD_INTERVAL_S and when asked to flush; at the
end of the schedule the master stops every user, asks each worker for its final batch and waits
for them (bounded) before closing the folder.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner, Runner, WorkerRunner

from loadgen import session
from loadgen.monitor import CpuMonitor

ROWS_MSG = "embedperf_rows"
FLUSH_MSG = "embedperf_flush"
FORWARD_INTERVAL_S = 1.0
FINAL_ROWS_TIMEOUT_S = 15.0
log = logging.getLogger("embedperf.loadgen")


class RowForwarder:
    """Worker side: buffer rows and send them to the master in batches."""

    def __init__(self, runner: WorkerRunner, worker: str, cpu: CpuMonitor) -> None:
        self.runner = runner
        self.worker = worker
        self.cpu = cpu
        self._rows: list[list[Any]] = []
        self._greenlet = gevent.spawn(self._loop)

    def add(self, values: list[Any]) -> None:
        self._rows.append(values)

    def _loop(self) -> None:
        while True:
            gevent.sleep(FORWARD_INTERVAL_S)
            self.send()

    def send(self, final: bool = False) -> None:
        rows, self._rows = self._rows, []
        data = {"worker": self.worker, "rows": rows, "cpu": self.cpu.take_new(), "final": final}
        self.runner.send_message(ROWS_MSG, data)

    def stop(self) -> None:
        self._greenlet.kill(block=False)
        self.send(final=True)


_forwarder: RowForwarder | None = None


def set_forwarder(forwarder: RowForwarder | None) -> None:
    global _forwarder
    if _forwarder is not None and forwarder is not _forwarder:
        _forwarder.stop()
    _forwarder = forwarder


def register_worker(runner: WorkerRunner) -> None:
    def on_flush(environment: Environment, msg: Message, **_: Any) -> None:
        if _forwarder is not None:
            _forwarder.send(final=True)

    runner.register_message(FLUSH_MSG, on_flush)


def register_master(runner: MasterRunner) -> None:
    def on_rows(environment: Environment, msg: Message, **_: Any) -> None:
        run = session.current_session()
        if run is None:
            log.warning(
                "embedperf: %d rows from %s arrived after the run folder closed",
                len(msg.data["rows"]),
                msg.node_id,
            )
            return
        run.recorder.write_many(msg.data["rows"])
        run.add_cpu_samples(msg.data.get("cpu", []))
        if msg.data.get("final"):
            run.final_batches.add(str(msg.data["worker"]))

    runner.register_message(ROWS_MSG, on_rows)


def is_distributed(runner: Runner | None) -> bool:
    return isinstance(runner, MasterRunner)


def collect_final_rows(run: session.RunSession, runner: MasterRunner) -> None:
    """Ask every worker for its last rows and wait until each has answered (or the timeout)."""
    run.final_batches.clear()
    expected = runner.worker_count
    runner.send_message(FLUSH_MSG)
    deadline = time.monotonic() + FINAL_ROWS_TIMEOUT_S
    while len(run.final_batches) < expected and time.monotonic() < deadline:
        gevent.sleep(0.1)
    if len(run.final_batches) < expected:
        run.manifest.notes.append(
            f"only {len(run.final_batches)} of {expected} workers sent their final rows within {FINAL_ROWS_TIMEOUT_S:.0f} s"
        )

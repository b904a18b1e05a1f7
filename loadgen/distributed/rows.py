"""Distributed mode: workers forward row batches to the master, which writes the one run folder.

Workers send `embedperf_rows` every FORWARD_INTERVAL_S (empty batches too: they double as a
heartbeat the master's WorkerBook reads) and when asked to flush. At the end of the schedule the
master stops every user, asks each live worker for its final batch -- a worker first reports its
last Locust statistics, then its last rows, over the same ordered connection, so the rows in the
folder and the requests Locust counted agree -- and waits for them (bounded) before closing the
folder. An open-loop schedule is split between the workers (loadgen.traffic.shares).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.rpc import Message
from locust.runners import STATE_MISSING, MasterRunner, Runner, WorkerRunner

from loadgen.lifecycle import session
from loadgen.lifecycle.verdict import EXIT_USAGE
from loadgen.lifecycle.worker_book import WorkerBook
from loadgen.recording.monitor import CpuMonitor
from loadgen.traffic import context
from loadgen.traffic.shares import encode_shares

ROWS_MSG = "embedperf_rows"
FLUSH_MSG = "embedperf_flush"
FORWARD_INTERVAL_S = 1.0
FINAL_ROWS_TIMEOUT_S = 15.0
SIGTERM_FINAL_ROWS_TIMEOUT_S = 5.0
START_LEAD_S = 1.0  # open loop: the shared origin lies this far ahead, so every worker has its share by then
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
        data: dict[str, Any] = {
            "worker": self.worker,
            "rows": rows,
            "cpu": self.cpu.take_new(),
            "final": final,
        }
        ctx = context.current_or_none()
        if final and ctx is not None and ctx.open_loop_stats:
            data["open_loop"] = dict(ctx.open_loop_stats)
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
        runner._send_stats()  # Locust's counts first: the master sees them before the last rows
        if _forwarder is not None:
            _forwarder.send(final=True)
        else:  # no test started here (joined late): answer anyway, so the master does not wait
            runner.send_message(ROWS_MSG, {"worker": context.worker_name(runner.client_id, runner.worker_index),
                                           "rows": [], "cpu": [], "final": True})  # fmt: skip

    runner.register_message(FLUSH_MSG, on_flush)


def book_of(run: session.RunSession) -> WorkerBook:
    if run.workers is None:
        run.workers = WorkerBook()
    return run.workers


def register_master(runner: MasterRunner) -> None:
    def on_rows(environment: Environment, msg: Message, **_: Any) -> None:
        run = session.current_session()
        rows = msg.data["rows"]
        if run is None:
            if rows:
                log.warning(
                    "embedperf: %d rows from %s arrived after the run folder closed", len(rows), msg.node_id
                )
            return
        run.recorder.write_many(rows)
        run.add_cpu_samples(msg.data.get("cpu", []))
        final = bool(msg.data.get("final"))
        book_of(run).batch(
            msg.node_id, str(msg.data["worker"]), len(rows), time.time(), final, msg.data.get("open_loop")
        )

    runner.register_message(ROWS_MSG, on_rows)
    gevent.spawn(_watch_workers, runner)


def _watch_workers(runner: MasterRunner) -> None:
    """Master side: say when a worker falls silent (the book records how long it was missing); a worker
    Locust lost before it sent anything is booked as missing since the run began."""
    while True:
        gevent.sleep(FORWARD_INTERVAL_S)
        run = session.current_session()
        if run is None:
            continue
        book = book_of(run)
        gone = book.check(time.time())
        since = run.manifest.start_unix_s or time.time()
        for client in list(runner.clients.values()):
            name = context.worker_name(client.id, runner.get_worker_index(client.id))
            if client.state == STATE_MISSING and book.never_heard(client.id, name, since):
                gone.append(name)
        for worker in gone:
            log.warning("embedperf: worker %s sent nothing for a while; counting it as missing", worker)


def is_distributed(runner: Runner | None) -> bool:
    return isinstance(runner, MasterRunner)


def live_client_ids(runner: MasterRunner) -> list[str]:
    """Workers the master can still reach, in a stable order."""
    return sorted(str(c.id) for c in runner.clients.values() if c.state != STATE_MISSING)


def publish_shares(runner: MasterRunner, origin_unix_s: float) -> int:
    """Give every connected worker its share of the open-loop schedule; returns the number of shares.

    The assignment rides on Locust's parsed options, which the master sends with every spawn message.
    """
    clients = live_client_ids(runner)
    options = runner.environment.parsed_options
    if options is not None:
        options.embedperf_shares = encode_shares(clients, origin_unix_s)
    return max(len(clients), 1)


def collect_final_rows(
    run: session.RunSession, runner: MasterRunner, timeout_s: float = FINAL_ROWS_TIMEOUT_S
) -> None:
    """Ask every live worker for its last rows and wait until each has answered, gone missing, or the timeout."""
    book = book_of(run)
    book.reset_finals()
    runner.send_message(FLUSH_MSG)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = set(live_client_ids(runner)) - book.finals() - book.missing_now()
        if not pending:
            return
        gevent.sleep(0.05)
    pending = set(live_client_ids(runner)) - book.finals()
    run.manifest.notes.append(
        f"{len(pending)} worker(s) did not send their final rows within {timeout_s:.0f} s: {', '.join(sorted(pending))}"
    )


def stop_master_on_sigterm(runner: MasterRunner) -> None:
    """SIGTERM on the master. Before the run started (still waiting for workers): tell the connected
    workers to quit and exit 2, nothing was measured. During the run: collect the workers' rows
    (briefly), then quit; the folder is finalised and the exit code says incomplete (3)."""
    run = session.current_session()
    if run is None:
        log.info("embedperf: SIGTERM while waiting for workers; nothing was measured")
        runner.quit()
        raise SystemExit(EXIT_USAGE)
    run.manifest.notes.append("stopped by SIGTERM")
    collect_final_rows(run, runner, SIGTERM_FINAL_ROWS_TIMEOUT_S)
    runner.quit()

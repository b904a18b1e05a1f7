"""Distributed mode: workers forward row batches to the master, which writes the one run folder. Batches go
every FORWARD_INTERVAL_S, empty ones too: they are the heartbeat the master's WorkerBook reads. At the end the
master stops every user and waits (bounded) for each live worker's final batch, which rides in its next Locust
statistics report (`report_to_master`/`worker_report`), so the folder's rows and Locust's request counts are
taken at the same instant and agree.

Adaptive open-loop steps: the master decides where a step ends from the forwarded rows (recording.until_watch)
and places the cut CUT_LEAD_S ahead of now, longer than a message takes to reach a worker, so each worker's
dispatcher applies it before its schedule gets there (traffic.schedule.StageCuts)."""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment
from locust.rpc import Message
from locust.runners import STATE_MISSING, WORKER_REPORT_INTERVAL, MasterRunner, Runner, WorkerRunner

from embedperf.schema import RequestRow
from loadgen.lifecycle import session
from loadgen.lifecycle.run_state import state_of
from loadgen.lifecycle.verdict import EXIT_USAGE
from loadgen.lifecycle.worker_book import WorkerBook
from loadgen.recording.monitor import CpuMonitor
from loadgen.traffic import context
from loadgen.traffic.shares import encode_shares

ROWS_MSG = "embedperf_rows"
CUT_MSG = "embedperf_stage_cut"
CUT_LEAD_S = 1.0
FLUSH_MSG = "embedperf_flush"
REPORT_KEY = "embedperf_final_rows"  # the final batch's key in a worker's statistics report
FORWARD_INTERVAL_S = 1.0
FINAL_ROWS_TIMEOUT_S = 15.0
SIGTERM_FINAL_ROWS_TIMEOUT_S = 2 * WORKER_REPORT_INTERVAL  # the next report, with room for a busy worker
START_LEAD_S = 1.0  # open loop: the shared origin lies this far ahead, so every worker has its share by then
log = logging.getLogger("embedperf.loadgen")


class RowForwarder:
    """Worker side: buffer rows and send them to the master in batches."""

    def __init__(self, runner: WorkerRunner, worker: str, cpu: CpuMonitor) -> None:
        self.runner = runner
        self.worker = worker
        self.cpu = cpu
        self.open_loop_stats: dict[str, float] = {}  # the worker's open-loop counters (its RunContext's)
        self._rows: list[list[Any]] = []
        self._greenlet = gevent.spawn(self._loop)

    def add(self, row: RequestRow) -> None:
        """The worker's row sink: a row travels as its values in REQUEST_COLUMNS order (msgpack)."""
        self._rows.append(row.values())

    def _loop(self) -> None:
        while True:
            gevent.sleep(FORWARD_INTERVAL_S)
            self.send()

    def batch(self, final: bool = False) -> dict[str, Any]:
        """The rows buffered so far (taken: each row leaves once) with the CPU samples since the last batch."""
        rows, self._rows = self._rows, []
        data = {"worker": self.worker, "rows": rows, "cpu": self.cpu.take_new(), "final": final}
        if final and self.open_loop_stats:
            data["open_loop"] = dict(self.open_loop_stats)
        return data

    def send(self, final: bool = False) -> None:
        self.runner.send_message(ROWS_MSG, self.batch(final))

    def stop(self) -> None:
        self._greenlet.kill(block=False)
        self.send(final=True)


def register_worker(runner: WorkerRunner) -> None:
    """Worker side of the final flush: once the master asks, the next statistics report carries the last rows."""
    requested = False

    def on_flush(environment: Environment, msg: Message, **_: Any) -> None:
        nonlocal requested
        requested = True

    def on_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
        # Locust's report_to_master: `data` already holds the statistics; nothing yields in between
        nonlocal requested
        if not requested:
            return
        requested = False
        forwarder = state_of(runner.environment).forwarder
        if forwarder is not None:
            data[REPORT_KEY] = forwarder.batch(final=True)
        else:  # no test started here (joined late): answer anyway, so the master does not wait
            name = context.worker_name(runner.client_id, runner.worker_index)
            data[REPORT_KEY] = {"worker": name, "rows": [], "cpu": [], "final": True}

    runner.register_message(FLUSH_MSG, on_flush)
    runner.environment.events.report_to_master.add_listener(on_report)


def register_worker_cuts(runner: WorkerRunner) -> None:
    def on_cut(environment: Environment, msg: Message, **_: Any) -> None:
        ctx = state_of(environment).context
        if ctx is not None and ctx.stage_cuts is not None:
            ctx.stage_cuts.cut(int(msg.data["index"]), float(msg.data["planned_offset_s"]))

    runner.register_message(CUT_MSG, on_cut)


def publish_cut(runner: MasterRunner, index: int, planned_offset_s: float) -> None:
    runner.send_message(CUT_MSG, {"index": index, "planned_offset_s": planned_offset_s})


def book_of(run: session.RunSession) -> WorkerBook:
    if run.workers is None:
        run.workers = WorkerBook()
    return run.workers


def register_master(runner: MasterRunner) -> None:
    def on_rows(environment: Environment, msg: Message, **_: Any) -> None:
        write_batch(environment, msg.node_id, msg.data)

    def on_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
        batch = data.get(REPORT_KEY)
        if batch is not None:
            write_batch(runner.environment, client_id, batch)

    runner.register_message(ROWS_MSG, on_rows)
    runner.environment.events.worker_report.add_listener(on_report)
    gevent.spawn(_watch_workers, runner)


def write_batch(environment: Environment, client_id: str, data: dict[str, Any]) -> None:
    """Master side: one worker's batch into the run folder, and into the book of its workers."""
    run = state_of(environment).current_session()
    rows = data["rows"]
    if run is None:
        if rows:
            log.warning("embedperf: %d rows from %s arrived after the run folder closed", len(rows), client_id)
        return
    run.recorder.write_many(rows)
    run.cpu_samples.extend(data.get("cpu", []))
    final = bool(data.get("final"))
    book_of(run).batch(client_id, str(data["worker"]), len(rows), time.time(), final, data.get("open_loop"))


def _watch_workers(runner: MasterRunner) -> None:
    """Master side: warn when a worker falls silent or Locust loses it."""
    state = state_of(runner.environment)
    while True:
        gevent.sleep(FORWARD_INTERVAL_S)
        if (run := state.current_session()) is not None:
            for worker in book_missing_workers(run, runner):
                log.warning("embedperf: worker %s sent nothing for a while; counting it as missing", worker)


def book_missing_workers(run: session.RunSession, runner: MasterRunner) -> list[str]:
    """Book workers silent for MISSING_AFTER_S and those Locust's heartbeat has lost (one lost before its first
    batch: since the start); returns the newly missing. Locust can lose a worker before the book's own rule
    fires, so the run's end books them too."""
    book = book_of(run)
    gone = book.check(time.time())
    since = run.manifest.start_unix_s or time.time()
    for client in list(runner.clients.values()):
        name = context.worker_name(client.id, runner.get_worker_index(client.id))
        if client.state == STATE_MISSING and book.lost(client.id, name, since):
            gone.append(name)
    return gone


def is_distributed(runner: Runner | None) -> bool:
    return isinstance(runner, MasterRunner)


def live_client_ids(runner: MasterRunner) -> list[str]:
    """Workers the master can still reach, in a stable order."""
    return sorted(str(c.id) for c in runner.clients.values() if c.state != STATE_MISSING)


def publish_shares(runner: MasterRunner, origin_unix_s: float) -> int:
    """Give each live worker its open-loop share (in the parsed options every spawn message carries)."""
    clients = live_client_ids(runner)
    options = runner.environment.parsed_options
    if options is not None:
        options.embedperf_shares = encode_shares(clients, origin_unix_s)
    return max(len(clients), 1)


def collect_final_rows(run: session.RunSession, runner: MasterRunner, timeout_s: float = FINAL_ROWS_TIMEOUT_S) -> None:
    """Ask every live worker for its last rows and wait until each has answered, gone missing, or the timeout."""
    book = book_of(run)
    book.reset_finals()
    runner.send_message(FLUSH_MSG)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not set(live_client_ids(runner)) - book.finals() - book.missing_now():
            break
        gevent.sleep(0.05)
    else:
        pending = set(live_client_ids(runner)) - book.finals()
        run.manifest.notes.append(
            f"{len(pending)} worker(s) did not send their final rows within {timeout_s:.0f} s: {', '.join(sorted(pending))}"
        )
    book_missing_workers(run, runner)  # one Locust lost since the watcher last looked


def stop_master_on_sigterm(runner: MasterRunner) -> None:
    """SIGTERM on the master: still waiting for workers, quit and exit 2 (nothing measured); during the run,
    collect the workers' rows briefly, then quit (the folder is finalised, exit 3)."""
    run = state_of(runner.environment).current_session()
    if run is None:
        log.info("embedperf: SIGTERM while waiting for workers; nothing was measured")
        runner.quit()
        raise SystemExit(EXIT_USAGE)
    run.manifest.notes.append("stopped by SIGTERM")
    collect_final_rows(run, runner, SIGTERM_FINAL_ROWS_TIMEOUT_S)
    runner.quit()

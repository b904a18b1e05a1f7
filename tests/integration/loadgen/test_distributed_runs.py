"""Locust master + local workers against the stub server: one run folder, each stage once, shared schedules,
a worker killed mid-run, SIGTERM while the master waits, a worker's last rows with its last statistics."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import psutil
import pytest

from analysis.run.analyse import analyse_folder
from embedperf.schema import Manifest, RunFolder, read_manifest, read_requests_table
from loadgen.cli import run as run_cli
from loadgen.cli.local_workers import LocalWorkers
from loadgen.lifecycle.announcements import SIGTERM_READY_LOG
from loadgen.processes.stub_target import running_stub
from tests.conftest import python_json

REPO_ROOT = Path(__file__).resolve().parents[3]
QUIET = ["--no-collectors", "--loglevel", "WARNING"]
WAIT_TIMEOUT_S = 90.0  # a guard against a hang, not a performance bound


@pytest.fixture
def stub_url() -> Iterator[str]:
    with running_stub("--delay-ms", "20") as url:  # ~50 answers/s per closed-loop user: no core spent on load
        yield url


def _locust(locustfile: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "locustfiles" / locustfile), *args]


def _start_master(
    workers: LocalWorkers, locustfile: str, *args: str, expect: int = 0
) -> subprocess.Popen[str]:
    master_args = workers.master_args()
    if expect:
        master_args[master_args.index("--expect-workers") + 1] = str(expect)
    return subprocess.Popen(
        _locust(locustfile, "--headless", "--only-summary", *master_args, *QUIET, *args),
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip


def _folder(stdout: str) -> RunFolder:
    lines = [line for line in stdout.splitlines() if line.startswith("run folder: ")]
    assert lines, stdout[-3000:]
    return RunFolder(Path(lines[-1].removeprefix("run folder: ").strip()))


def _locust_count(folder: RunFolder) -> int:
    with open(folder.locust / "locust_stats.csv", encoding="utf-8") as fh:
        return int({r["Name"]: r for r in csv.DictReader(fh)}["Aggregated"]["Request Count"])


def _run(locustfile: str, n_workers: int, tmp_path: Path, *args: str) -> tuple[int, RunFolder, str]:
    workers = LocalWorkers(n_workers, REPO_ROOT / "locustfiles" / locustfile)
    with workers:
        master = _start_master(workers, locustfile, "--runs-dir", str(tmp_path), *args)
        out, err = master.communicate(timeout=120)
    assert all(p.poll() is not None for p in workers.procs)
    return master.returncode, _folder(out), err


def forwarded_by(runs_dir: Path) -> set[str]:
    """The workers whose rows the master has written into the run folder so far (its parts)."""
    folders = [p for p in runs_dir.iterdir() if p.is_dir()]
    if len(folders) != 1:
        return set()
    return set(read_requests_table(RunFolder(folders[0]), ["worker"]).column("worker").to_pylist())


def _stages_once(manifest: Manifest) -> None:
    indices = [s.index for s in manifest.stages]
    assert indices == sorted(set(indices)) == list(range(len(manifest.scenario.steps)))


def test_open_loop_four_workers_at_400_per_s_land_400_in_one_folder(stub_url: str, tmp_path: Path) -> None:
    """The done-when check: 4 workers, 400 req/s open loop, every request in one folder, 400 +- 8 req/s."""
    code, folder, err = _run(
        "openloop.py", 4, tmp_path, "--host", stub_url,
        "--set", "steps=[{rate: 400, duration_s: 3}, {rate: 120, duration_s: 2}]",
        "--set", "open_loop.arrival=constant", "--set", "drain_s=1",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    manifest = read_manifest(folder)
    _stages_once(manifest)
    rows = read_requests_table(folder).to_pylist()
    assert len(rows) == 1200 + 240 == _locust_count(folder)  # every arrival once, none lost
    assert all(r["ok"] for r in rows), {r["error"] for r in rows}
    per_worker: dict[str, int] = {}
    for r in rows:
        per_worker[r["worker"]] = per_worker.get(r["worker"], 0) + 1
    assert sorted(per_worker.values()) == [360, 360, 360, 360]  # rate/4 each
    stage_starts = {s.index: s.start_unix_s for s in manifest.stages}
    for index, rate, n in ((0, 400.0, 1200), (1, 120.0, 240)):  # the union is the evenly spaced schedule
        intended = sorted(r["t_intended_unix_s"] for r in rows if r["stage_index"] == index)
        assert len(intended) == n
        assert intended[0] == pytest.approx(stage_starts[index], abs=1e-6)
        gaps = [b - a for a, b in zip(intended, intended[1:], strict=False)]
        assert min(gaps) == pytest.approx(1 / rate, abs=1e-6) and max(gaps) == pytest.approx(
            1 / rate, abs=1e-6
        )
    assert manifest.open_loop["sent"] == 1440  # type: ignore[attr-defined]  # summed over the workers
    steps = analyse_folder(folder).summary.steps
    assert abs(steps[0].stats.offered_qps - 400.0) <= 8.0 and abs(steps[1].stats.offered_qps - 120.0) <= 2.4


def test_open_loop_two_workers_poisson_streams(stub_url: str, tmp_path: Path) -> None:
    code, folder, err = _run(
        "openloop.py", 2, tmp_path, "--host", stub_url,
        "--set", "steps=[{rate: 100, duration_s: 3}]", "--set", "open_loop.arrival=poisson", "--set", "drain_s=1",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    rows = read_requests_table(folder).to_pylist()
    assert len(rows) == _locust_count(folder)
    by_worker: dict[str, list[float]] = {}
    for r in rows:
        by_worker.setdefault(r["worker"], []).append(r["t_intended_unix_s"])
    assert len(by_worker) == 2
    for times in by_worker.values():  # each a Poisson(50/s) stream over 3 s: 150 +- 5 sd
        assert 150 - 5 * 12.3 < len(times) < 150 + 5 * 12.3
    first, second = (sorted(t) for t in by_worker.values())
    assert not set(first) & set(second)  # distinct seeds, not one stream twice


# The kill must land inside the stage: a worker gone during the drain missed no load (missing_s 0). The
# test kills once both workers' rows show in the master's folder, which a busy host can delay by seconds,
# so the stage is long enough to leave room after that.
KILLED_RUN_S = 15.0


def test_worker_killed_mid_run_is_named_with_its_missing_seconds(stub_url: str, tmp_path: Path) -> None:
    workers = LocalWorkers(2, REPO_ROOT / "locustfiles" / "ramp.py")
    with workers:
        master = _start_master(
            workers, "ramp.py", "--runs-dir", str(tmp_path), "--scenario", "smoke", "--host", stub_url,
            "--set", f"steps=[{{users: 4, duration_s: {KILLED_RUN_S:g}}}]",
        )  # fmt: skip
        start = time.monotonic()
        while len(forwarded_by(tmp_path)) < 2:  # both workers' rows are in the master's run folder
            assert time.monotonic() - start < WAIT_TIMEOUT_S and master.poll() is None
            time.sleep(0.2)
        os.kill(workers.pids[0], signal.SIGKILL)
        killed_unix_s = time.time()
        out, err = master.communicate(timeout=120)
    assert master.returncode == 0, err[-3000:]  # the run finishes with the other worker
    folder = _folder(out)
    manifest = read_manifest(folder)
    assert manifest.complete and not manifest.interrupted  # type: ignore[attr-defined]
    gone = [w for w in manifest.workers if w.missing_s > 0]
    alive = [w for w in manifest.workers if w.missing_s == 0]
    stage = manifest.stages[0]
    assert len(gone) == 1 and len(alive) == 1, (killed_unix_s, stage, manifest.workers, manifest.notes, err[-3000:])
    assert alive[0].final_rows and not gone[0].final_rows
    assert 0 < gone[0].missing_s < KILLED_RUN_S and gone[0].rows > 0
    assert any(gone[0].worker in note and "missing for" in note for note in manifest.notes)
    table = read_requests_table(folder)
    assert table.num_rows > 0 and set(table.column("worker").to_pylist()) == {gone[0].worker, alive[0].worker}


class LogWatch:
    """Reads a process's stderr to its end in a thread; `seen` is set once a line containing each of
    `wanted` has appeared (in any order)."""

    def __init__(self, proc: subprocess.Popen[str], *wanted: str) -> None:
        self.lines: list[str] = []
        self.seen = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(proc, wanted), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[str], wanted: tuple[str, ...]) -> None:
        assert proc.stderr is not None
        missing = set(wanted)
        for line in proc.stderr:
            self.lines.append(line)
            missing = {w for w in missing if w not in line}
            if not missing:
                self.seen.set()

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def test_sigterm_while_the_master_waits_for_workers(stub_url: str, tmp_path: Path) -> None:
    with ExitStack() as stack:
        workers = stack.enter_context(LocalWorkers(1, REPO_ROOT / "locustfiles" / "ramp.py"))
        master = _start_master(  # it expects a second worker that never comes; INFO: Locust logs each arrival
            workers, "ramp.py", "--runs-dir", str(tmp_path), "--host", stub_url, "--loglevel", "INFO", expect=2,
        )  # fmt: skip
        log = LogWatch(master, "reported as ready. 1 workers connected.", SIGTERM_READY_LOG)
        assert log.seen.wait(WAIT_TIMEOUT_S), log.lines[-20:]  # the worker is in and the master handles SIGTERM
        master.send_signal(signal.SIGTERM)
        master.wait(timeout=60)
        assert master.returncode == 2, log.text()[-3000:]
        assert workers.procs[0].wait(timeout=60) is not None  # told to quit: no orphan
    assert list(tmp_path.iterdir()) == []  # nothing was measured


def test_sigterm_during_a_distributed_run_is_incomplete(stub_url: str, tmp_path: Path) -> None:
    workers = LocalWorkers(2, REPO_ROOT / "locustfiles" / "ramp.py")
    with workers:
        master = _start_master(
            workers, "ramp.py", "--runs-dir", str(tmp_path), "--scenario", "smoke", "--host", stub_url,
            "--step-duration-s", "60",
        )  # fmt: skip
        start = time.monotonic()
        while httpx.get(f"{stub_url}/_count").json()["requests"] < 100:
            assert time.monotonic() - start < 90 and master.poll() is None
            time.sleep(0.2)
        master.send_signal(signal.SIGTERM)
        out, err = master.communicate(timeout=60)
        for proc in workers.procs:
            proc.wait(timeout=60)
    assert master.returncode == 3, err[-3000:]
    folder = _folder(out)
    manifest = read_manifest(folder)
    assert manifest.interrupted and "stopped by SIGTERM" in manifest.notes  # type: ignore[attr-defined]
    assert [s.index for s in manifest.stages] == [0]  # once, and ended
    assert manifest.stages[0].end_unix_s is not None
    assert read_requests_table(folder).num_rows > 100 * 0.5


def test_embedperf_run_two_workers_closed_loop_one_folder_each_stage_once(
    stub_url: str, tmp_path: Path
) -> None:
    code = run_cli.main(
        ["smoke", "--host", stub_url, "--runs-dir", str(tmp_path), "--no-collectors", "--workers", "2",
         "--set", "steps.duration_s=2"]
    )  # fmt: skip
    assert code == 0
    locusts = _children(psutil.Process(), "locust")
    assert locusts == []  # the master and both workers are gone
    (folder_path,) = tmp_path.iterdir()
    folder = RunFolder(folder_path)
    manifest = read_manifest(folder)
    _stages_once(manifest)
    assert [s.label for s in manifest.stages] == ["u1", "u4"] and manifest.complete
    table = read_requests_table(folder)
    assert table.num_rows == _locust_count(folder) > 0  # no row lost on the way to the master
    names = set(table.column("worker").to_pylist())
    assert len(names) == 2 and {w.worker for w in manifest.workers} == names
    assert all(w.final_rows and w.missing_s == 0 and w.rows > 0 for w in manifest.workers)
    assert sum(w.rows for w in manifest.workers) == table.num_rows
    cpu_of = {s["worker"] for s in manifest.generator_cpu_samples}  # type: ignore[attr-defined]
    assert cpu_of >= names | {"master"}  # the master's own CPU beside the workers'


def _children(parent: psutil.Process, flag: str) -> list[psutil.Process]:
    """The parent's descendants whose command line holds `flag` (--worker, --master)."""
    found = []
    for child in parent.children(recursive=True):
        try:
            if flag in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def test_sigkill_of_embedperf_run_with_workers_leaves_no_worker(stub_url: str, tmp_path: Path) -> None:
    """`embedperf run --workers 2` killed outright (no handler of its own runs): its workers die with it."""
    run = subprocess.Popen(
        [sys.executable, "-m", "embedperf.cli", "run", "smoke", "--host", stub_url, "--runs-dir", str(tmp_path),
         "--no-collectors", "--workers", "2", "--set", "steps=[{users: 4, duration_s: 60}]"],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    runner = psutil.Process(run.pid)
    masters: list[psutil.Process] = []
    workers: list[psutil.Process] = []
    try:
        start = time.monotonic()
        while len(forwarded_by(tmp_path)) < 2:  # both workers are sending load and forwarding its rows
            assert time.monotonic() - start < WAIT_TIMEOUT_S and run.poll() is None
            time.sleep(0.2)
        workers = _children(runner, "--worker")
        masters = _children(runner, "--master")
        assert len(workers) == 2 and len(masters) == 1
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        gone, alive = psutil.wait_procs(workers, timeout=60)  # by PID: a reused name proves nothing
        assert not alive, f"workers left running after SIGKILL of embedperf run: {[p.pid for p in alive]}"
        assert sorted(p.pid for p in gone) == sorted(w.pid for w in workers)
    finally:  # whatever happened, nothing this test started outlives it (ended by PID)
        if run.poll() is None:
            run.kill()
        for proc in [*workers, *masters]:  # the orphaned master is not what this test is about
            if proc.is_running():
                proc.kill()


def test_row_forwarding_at_5000_rows_per_s_loses_nothing() -> None:
    """Worker -> master forwarding alone (benchmarks/bench_distributed.py forwarding): every row arrives."""
    result = python_json(
        "-m", "benchmarks.bench_distributed", "forwarding", "--rows-per-s", "5000", "--duration-s", "2", "--json"
    )
    assert result["rows_sent"] > 5000 and result["rows_written"] == result["rows_sent"], result


# A master and a worker runner in one process over loopback; the worker counts each request with Locust's
# request event and records its row, as send_embeddings does. argv: runs dir, number of requests.
FINAL_ROWS_SCRIPT = """
import json, sys
from pathlib import Path
import gevent
from locust import User, constant, task
from locust.env import Environment
from embedperf.schema import RequestRow, read_requests_table
from loadgen.distributed import rows as distributed
from loadgen.lifecycle.run_state import attach
from loadgen.lifecycle.session import RunOptions
from loadgen.processes.service_proc import free_port
from loadgen.recording.monitor import CpuMonitor
from scenarios.loader import load_scenario

class Idle(User):
    wait_time = constant(1)
    @task
    def idle(self):
        pass

port = free_port()
master_env = Environment(user_classes=[Idle], host="http://127.0.0.1:9")
master = master_env.create_master_runner("127.0.0.1", port)
attach(master_env).bind(load_scenario("smoke"), RunOptions(runs_dir=Path(sys.argv[1]), collectors=False))
distributed.register_master(master)
worker_env = Environment(user_classes=[Idle])
worker_state = attach(worker_env)
worker = worker_env.create_worker_runner("127.0.0.1", port)
distributed.register_worker(worker)
for _ in range(1200):  # a guard against a hang: the worker's arrival is the event
    if master.clients.ready:
        break
    gevent.sleep(0.05)
run = attach(master_env).active()
forwarder = distributed.RowForwarder(worker, "w0-test", CpuMonitor(worker="w0-test"))
worker_state.forwarder = forwarder
n = int(sys.argv[2])
for i in range(n):
    worker_env.events.request.fire(request_type="POST", name="/v1/embeddings", response_time=5.0,
                                   response_length=10, exception=None, context={})
    forwarder.add(RequestRow(worker="w0-test", endpoint="/v1/embeddings", status_code=200, ok=True, n_inputs=1,
                             input_chars=10, t_intended_unix_s=1.0, t_sent_unix_s=1.0, t_done_unix_s=1.005,
                             latency_ms=5.0))
    if i % 50 == 49:
        gevent.sleep(0.01)  # the forwarder's and the reporter's greenlets run meanwhile
counted_before_flush = master.stats.total.num_requests
distributed.collect_final_rows(run, master)
counted = master.stats.total.num_requests
folder = run.finalise("test done")
print(json.dumps({"n": n, "counted_before_flush": counted_before_flush, "counted_at_close": counted,
                  "rows": read_requests_table(folder).num_rows, "notes": run.manifest.notes,
                  "final_rows": [w.final_rows for w in run.manifest.workers]}))
forwarder.stop()
worker.quit()
master.quit()
"""


def test_a_workers_last_rows_arrive_with_its_last_statistics(tmp_path: Path) -> None:
    """When the master closes the folder, Locust's counts and the rows agree: the final rows ride in the
    worker's next statistics report (Locust's report_to_master / worker_report), never ahead of it."""
    got = python_json("-c", FINAL_ROWS_SCRIPT, str(tmp_path), "400")
    assert got["counted_before_flush"] < got["n"]  # the last requests were not reported when the flush went out
    assert got["counted_at_close"] == got["rows"] == got["n"], got
    assert got["final_rows"] == [True] and not [n for n in got["notes"] if "final rows" in n], got

"""One load run's run folder, from the first stage to the final manifest (local or master process).

Started at the shape's first tick (or test start), finalised at test stop or when Locust quits (the run's
state, loadgen.lifecycle.run_state, decides when): the manifest is written with complete=False at the start
and complete=True at the end, so a crash leaves a readable folder whose manifest says it is incomplete."""

from __future__ import annotations

import csv
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locust.env import Environment
from locust.html import get_html_report
from locust.runners import MasterRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from embedperf.provenance import git_info, host_info, package_versions
from embedperf.schema import (
    CollectorStatus,
    Manifest,
    RunFolder,
    ServiceInfo,
    ServingDevices,
    new_manifest,
    new_run_folder,
    write_manifest,
)
from loadgen.lifecycle.announcements import RUN_FOLDER_PREFIX
from loadgen.lifecycle.worker_book import WorkerBook
from loadgen.processes.collectors_proc import CollectorsProcess, collectors_available, read_agent_records
from loadgen.recording.monitor import CpuMonitor, settle_heap, summarise
from loadgen.recording.recorder import Recorder, StageTimeline
from loadgen.recording.until_watch import UntilWatch
from loadgen.traffic import context, payloads
from loadgen.traffic.context import RunContext
from loadgen.traffic.protocols import registry
from scenarios.models import Scenario

log = logging.getLogger("embedperf.loadgen")
REPO_ROOT = Path(__file__).resolve().parents[2]
LOCUST_PREFIX = "locust"


@dataclass
class RunOptions:
    """What the command line decided, beyond the scenario itself."""

    runs_dir: Path
    label: str = ""
    collectors: bool = True
    devices: list[int] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    collector_args: list[str] = field(default_factory=list)


@dataclass
class RunSession:
    """The run folder being written by this process, and everything that ends up in its manifest."""

    environment: Environment
    scenario: Scenario
    options: RunOptions
    host: str
    folder: RunFolder = field(init=False)
    manifest: Manifest = field(init=False)
    timeline: StageTimeline = field(default_factory=StageTimeline)
    recorder: Recorder = field(init=False)
    until: UntilWatch = field(default_factory=UntilWatch)  # adaptive steps (steps.until)
    cpu: CpuMonitor = field(init=False)
    cpu_samples: list[dict[str, Any]] = field(default_factory=list)
    collectors: CollectorsProcess | None = None
    shape_completed: bool = False
    finalised: bool = False
    stop_reason: str = ""
    workers: WorkerBook | None = None  # distributed runs: the master's book of its workers
    ctx: RunContext | None = None  # what this process's users share (None on a master: its workers send)

    def start(self) -> None:
        self.folder = new_run_folder(self.options.runs_dir, self.scenario.name, self.options.label)
        service_info = context.fetch_service_info(self.host, self.scenario)
        info = _typed_info(service_info)
        self.manifest = new_manifest(
            self.folder.run_id, self.scenario, self.host, service_info=info, host=host_info(),
            serving_devices=serving_devices(self.options.devices or self.scenario.target.devices, info),
            label=self.options.label, versions=package_versions(), git=git_info(REPO_ROOT),
            start_unix_s=time.time(), complete=False,
        )
        self.manifest.locust_command = sys.argv  # type: ignore[attr-defined]  # kept as an extra key
        self.manifest.generator_pid = os.getpid()  # type: ignore[attr-defined]  # finds the folder after a crash
        write_manifest(self.folder, self.manifest)
        adaptive = any(step.until is not None for step in self.scenario.steps)
        self.recorder = Recorder(self.folder, self.timeline, watch=self.until.observe if adaptive else None)
        self.cpu = CpuMonitor(worker="master" if self._is_master else "local")
        self.cpu.start()
        if self.options.collectors and collectors_available():
            self.collectors = CollectorsProcess(
                self.folder, self.host, os.getpid(), extra_args=self.options.collector_args,
                agents=self.options.agents or self.scenario.target.agents,
                service_metrics=registry.get(self.scenario.target.protocol).metric_names,
            )
            self.collectors.start()
        if not self._is_master:
            self.ctx = context.build_context(self.scenario, self.host, self.recorder.write, "local", service_info)
            payloads.prepare(self.scenario.payload, service_info)  # tokenizer loads before the first step
        log.info("embedperf: writing run folder %s", self.folder.root)
        settle_heap()  # last thing before the load: what exists now lives for the whole run

    @property
    def _is_master(self) -> bool:
        return isinstance(self.environment.runner, MasterRunner)

    def finalise(self, reason: str) -> RunFolder:
        """Stop collectors, compact the rows, save Locust's stats and write the final manifest."""
        if self.finalised:
            return self.folder
        self.finalised = True
        self.stop_reason = reason
        end = time.time()
        self.timeline.end(end)
        self.cpu.stop()
        if self.collectors is not None:
            statuses = self.collectors.stop()
        else:
            off = not self.options.collectors
            why = "disabled with --no-collectors" if off else "collectors package not installed"
            statuses = [CollectorStatus(name="collectors", status="skipped", reason=why)]
        rows = self.recorder.close()
        try:
            write_locust_reports(self.environment, self.folder.locust)
        except Exception as exc:  # noqa: BLE001 - Locust's own report must never lose our run
            self.manifest.notes.append(f"Locust CSV/HTML not written: {exc}")
        ctx = self.ctx
        m = self.manifest
        m.end_unix_s, m.stages, m.collectors = end, self.timeline.stages, statuses
        m.agents = read_agent_records(self.folder)
        samples = self.cpu.samples + self.cpu_samples
        m.generator_cpu = summarise(samples)
        extras: dict[str, Any] = {  # Manifest keeps extra keys (extra="allow")
            "generator_cpu_samples": samples, "request_rows": rows, "interrupted": not self.shape_completed,
        }
        if ctx is not None:
            if ctx.expected_dim is not None:
                extras["expected_dimension"] = {"value": ctx.expected_dim, "source": ctx.dim_source}
            if ctx.open_loop_stats:
                extras["open_loop"] = ctx.open_loop_stats
            extras["connection_backoffs"] = {str(k): v for k, v in sorted(ctx.connection_backoffs.items())}
            if ctx.search is not None:
                extras["search"] = ctx.search  # decisions.search.state.SearchRecord
        for key, value in extras.items():
            setattr(m, key, value)
        if self.workers is not None:
            self.workers.finish(m, end)
        if not self.shape_completed:
            m.notes.append(f"run stopped before the scenario's last stage ended ({reason})")
        m.complete = True
        write_manifest(self.folder, m)
        print(f"{RUN_FOLDER_PREFIX}{self.folder.root}", flush=True)
        return self.folder


def _typed_info(raw: dict[str, Any] | None) -> ServiceInfo | None:
    """Any target may answer /info; one that does not fit the typed fields is recorded without them."""
    if raw is None:
        return None
    try:
        return ServiceInfo.model_validate(raw)
    except ValueError:
        return ServiceInfo.model_validate({k: v for k, v in raw.items() if k not in ServiceInfo.model_fields})


def write_locust_reports(environment: Environment, out_dir: Path) -> None:
    """Locust's own statistics for cross-checking: `locust_{stats,failures,exceptions}.csv`, `report.html`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    for suffix, method in (
        ("stats", stats_csv.requests_csv), ("failures", stats_csv.failures_csv),
        ("exceptions", stats_csv.exceptions_csv),
    ):
        with open(out_dir / f"{LOCUST_PREFIX}_{suffix}.csv", "w", newline="", encoding="utf-8") as fh:
            method(csv.writer(fh))
    html = get_html_report(environment, show_download_link=False)
    (out_dir / "report.html").write_text(html, encoding="utf-8")


def serving_devices(explicit: list[int], info: ServiceInfo | None) -> ServingDevices:
    """Explicit indices, else the accelerators /info lists (analysis adds those busy under load)."""
    if explicit:
        return ServingDevices(rule="explicit", indices=sorted(set(explicit)))
    if info is not None and info.accelerator_indices():
        return ServingDevices(rule="service_info", indices=info.accelerator_indices())
    return ServingDevices()

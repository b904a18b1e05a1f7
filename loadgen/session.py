"""One load run's run folder, from the first stage to the final manifest (local or master process).

Started at the shape's first tick (or test start), finalised at test stop or when Locust quits:
the manifest is written with complete=False at the start and complete=True at the end, so a
crash leaves a readable folder whose manifest says it is incomplete.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locust.env import Environment

from embedperf.provenance import git_info, host_info, package_versions
from embedperf.schema import CollectorStatus, Manifest, RunFolder, new_run_folder, write_manifest
from loadgen import context
from loadgen.collectors_proc import CollectorsProcess, collectors_available
from loadgen.locust_report import write_locust_reports
from loadgen.monitor import CpuMonitor, summarise
from loadgen.recorder import Recorder, StageTimeline
from scenarios.loader import scenario_for_manifest
from scenarios.models import Scenario

log = logging.getLogger("embedperf.loadgen")
REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RunOptions:
    """What the command line decided, beyond the scenario itself."""

    runs_dir: Path
    label: str = ""
    collectors: bool = True


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
    cpu: CpuMonitor = field(init=False)
    cpu_samples: list[dict[str, Any]] = field(default_factory=list)
    collectors: CollectorsProcess | None = None
    shape_completed: bool = False
    finalised: bool = False
    final_batches: set[str] = field(default_factory=set)

    def start(self) -> None:
        self.folder = new_run_folder(self.options.runs_dir, self.scenario.name, self.options.label)
        service_info = context.fetch_service_info(self.host, self.scenario)
        self.manifest = Manifest(
            run_id=self.folder.run_id,
            kind="open_loop" if self.scenario.is_open_loop else "closed_loop",
            scenario=scenario_for_manifest(self.scenario),
            target_url=self.host.rstrip("/") + self.scenario.target.path,
            label=self.options.label,
            service_info=service_info,
            host=host_info(),
            versions=package_versions(),
            git=git_info(REPO_ROOT),
            start_unix_s=time.time(),
            slo=self.scenario.slo.model_dump(),
            complete=False,
        )
        extra: dict[str, Any] = {
            "health": self.scenario.health.model_dump(),
            "profile": self.scenario.profile,
            "locust_command": sys.argv,
        }
        for key, value in extra.items():
            setattr(self.manifest, key, value)
        write_manifest(self.folder, self.manifest)
        self.recorder = Recorder(self.folder, self.timeline)
        self.cpu = CpuMonitor(worker="master" if self._is_master else "local")
        self.cpu.start()
        if self.options.collectors and collectors_available():
            self.collectors = CollectorsProcess(self.folder, self.host, os.getpid())
            self.collectors.start()
        if not self._is_master:
            ctx = context.build_context(
                self.scenario, self.host, self.recorder.write_values, "local", service_info
            )
            context.set_current(ctx)
        log.info("embedperf: writing run folder %s", self.folder.root)

    @property
    def _is_master(self) -> bool:
        from locust.runners import MasterRunner

        return isinstance(self.environment.runner, MasterRunner)

    def add_cpu_samples(self, samples: list[dict[str, Any]]) -> None:
        self.cpu_samples.extend(samples)

    def finalise(self, reason: str) -> RunFolder:
        """Stop collectors, compact the rows, save Locust's stats and write the final manifest."""
        if self.finalised:
            return self.folder
        self.finalised = True
        end = time.time()
        self.timeline.end(end)
        self.cpu.stop()
        if self.collectors is not None:
            statuses = self.collectors.stop()
        elif not self.options.collectors:
            statuses = [
                CollectorStatus(name="collectors", status="skipped", reason="disabled with --no-collectors")
            ]
        else:
            statuses = [
                CollectorStatus(
                    name="collectors", status="skipped", reason="collectors package not installed"
                )
            ]
        rows = self.recorder.close()
        try:
            write_locust_reports(self.environment, self.folder.locust)
        except Exception as exc:  # noqa: BLE001 - Locust's own report must never lose our run
            self.manifest.notes.append(f"Locust CSV/HTML not written: {exc}")
        ctx = context._current
        m = self.manifest
        m.end_unix_s = end
        m.stages = self.timeline.stages
        m.collectors = statuses
        samples = self.cpu.samples + self.cpu_samples
        m.generator_cpu = summarise(samples)
        extras: dict[str, Any] = {  # Manifest keeps extra keys (extra="allow")
            "generator_cpu_samples": samples,
            "request_rows": rows,
            "interrupted": not self.shape_completed,
        }
        if ctx is not None and ctx.expected_dim is not None:
            extras["expected_dimension"] = {"value": ctx.expected_dim, "source": ctx.dim_source}
        if ctx is not None and ctx.open_loop_stats:
            extras["open_loop"] = ctx.open_loop_stats
        for key, value in extras.items():
            setattr(m, key, value)
        if not self.shape_completed:
            m.notes.append(f"run stopped before the scenario's last stage ended ({reason})")
        m.complete = True
        write_manifest(self.folder, m)
        context.set_current(None)
        print(f"run folder: {self.folder.root}", flush=True)
        return self.folder


_active: RunSession | None = None
_environment: Environment | None = None
_options: RunOptions | None = None
_scenario: Scenario | None = None


def bind(environment: Environment, scenario: Scenario, options: RunOptions) -> None:
    """Called once at Locust's init on the local or master process."""
    global _environment, _options, _scenario
    _environment, _options, _scenario = environment, options, scenario


def active() -> RunSession | None:
    """The run being written, starting it on first use after `bind` (the shape ticks before test_start)."""
    global _active
    if _active is not None and not _active.finalised:
        return _active
    if _environment is None or _options is None or _scenario is None:
        return None
    host = _environment.host or _scenario.target.base_url
    _active = RunSession(_environment, _scenario, _options, host)
    _active.start()
    return _active


def current_session() -> RunSession | None:
    return _active if _active is not None and not _active.finalised else None


def finalise(reason: str) -> RunFolder | None:
    run = current_session()
    return run.finalise(reason) if run is not None else None

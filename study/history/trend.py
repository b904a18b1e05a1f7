"""Regressions across commits: the headline figures of every run of one series, and whether the newest is worse.

A series is the runs that can be compared at all (same scenario, loop kind, step loads and kind of target);
other runs are listed apart. Each run gives goodput and P99 at the series' highest load, each with its 95%
interval. The newest run is flagged on a figure when compare (analysis.compare.changes.compare_runs) calls it
worse against each of the last WINDOW runs and it is worse than the worst of theirs: beyond the spread
between runs as well as within one.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from analysis.compare.changes import compare_runs
from analysis.compare.samples import step_samples
from analysis.figures.bootstrap import interval, resampled_ratios, rng_for
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.errors import ConfigError, RunFolderError
from embedperf.schema import Manifest, RunFolder, read_manifest
from scenarios.cost_models import device_kind

WINDOW = 5
HEADLINE = ("qps", "p99_ms")  # goodput (higher is better), P99 (lower is better)
N_BOOT = 400


class SeriesKey(BaseModel):
    """What runs must share to sit on one trend."""

    scenario: str
    loop: str  # closed | open
    loads: list[float]
    protocol: str
    model: str | None
    device_kind: str | None

    def text(self) -> str:
        loads = ", ".join(f"{x:g}" for x in self.loads)
        return (
            f"{self.scenario} ({self.loop} loop, loads {loads}) against {self.protocol or 'auto'} "
            f"{self.model or '?'} on {self.device_kind or '?'}"
        )


class Point(BaseModel):
    """One run's headline figures, each with its 95% interval."""

    run_id: str
    start_unix_s: float
    commit: str
    dirty: bool
    label: str
    step: str
    qps: float
    qps_ci: tuple[float | None, float | None]
    p99_ms: float | None
    p99_ci_ms: tuple[float | None, float | None]
    max_qps_meeting_slo: float | None
    complete: bool


class Flag(BaseModel):
    metric: str
    newest: float | None
    worst_previous: float | None
    reason: str


class History(BaseModel):
    """summary of `embedperf history`: the trend, the newest run's verdict, and the runs kept apart."""

    key: SeriesKey
    points: list[Point]
    flags: list[Flag]
    compared_with: list[str]
    apart: list[dict[str, str]]  # run_id, series: runs of other series or that could not be read

    @property
    def regressed(self) -> bool:
        return bool(self.flags)


def series_key(manifest: Manifest) -> SeriesKey:
    info, open_loop = manifest.service_info, manifest.scenario.is_open_loop
    return SeriesKey(
        scenario=manifest.scenario.name,
        loop="open" if open_loop else "closed",
        loads=[float((s.rate if open_loop else s.users) or 0) for s in manifest.scenario.steps],
        protocol=manifest.scenario.target.protocol,
        model=info.model if info else None,
        device_kind=device_kind(
            [], [d.kind for d in info.devices] if info else [], info.device if info else None
        ),
    )


def run_folders(runs_dir: Path) -> list[tuple[RunFolder, Manifest | None]]:
    """Every run folder directly under runs_dir with its manifest (None: unreadable), oldest first."""
    if not runs_dir.is_dir():
        raise ConfigError(f"{runs_dir} is not a folder of runs; pass the folder that holds runs/<run_id>/")
    found: list[tuple[RunFolder, Manifest | None]] = []
    for root in sorted(p for p in runs_dir.iterdir() if (p / "manifest.json").is_file()):
        folder = RunFolder(root)
        try:
            found.append((folder, read_manifest(folder)))
        except (RunFolderError, ValueError, OSError):
            found.append((folder, None))
    return sorted(found, key=lambda f: (f[1].start_unix_s or 0.0) if f[1] else 0.0)


def point(analysis: RunAnalysis) -> Point | None:
    """The run's headline at its highest measured load (None when no step has requests)."""
    summary = analysis.summary
    if not (measured := [s for s in summary.steps if s.stats.n_requests > 0]):
        return None
    top = max(measured, key=lambda s: (s.stats.load, s.stats.index))
    samples = step_samples(analysis)[top.stats.index]
    qps_ci = interval(
        resampled_ratios(samples.ok_counts, samples.bin_widths_s, N_BOOT, rng_for(top.stats.index + 1))
    )
    git = summary.git or {}
    return Point(
        run_id=summary.run_id,
        start_unix_s=summary.start_unix_s or 0.0,
        commit=str(git.get("commit") or "")[:10],
        dirty=bool(git.get("dirty")),
        label=summary.label,
        step=top.stats.label,
        qps=top.stats.goodput_qps,
        qps_ci=qps_ci,
        p99_ms=top.stats.latency.p99_ms,
        p99_ci_ms=top.stats.p99_ci_ms,
        max_qps_meeting_slo=summary.capacity.max_qps_meeting_slo,
        complete=summary.complete,
    )


def _worse(metric: str, value: float | None, than: float | None) -> bool:
    if value is None or than is None:
        return False
    return value < than if metric == "qps" else value > than


def flags(newest: RunAnalysis, previous: list[RunAnalysis], points: dict[str, Point]) -> list[Flag]:
    """The newest run's headline figures that are worse than every previous run's beyond their noise."""
    if not previous:
        return []
    comparisons = [compare_runs(p, [newest], n_boot=N_BOOT).candidates[0] for p in previous]
    out = []
    for metric in HEADLINE:
        changes = [c.overall.metrics.get(metric) for c in comparisons]
        if not all(ch is not None and ch.verdict == "worse" for ch in changes):
            continue
        values = [getattr(points[p.summary.run_id], metric) for p in previous]
        known = [v for v in values if v is not None]
        worst = (min(known) if metric == "qps" else max(known)) if known else None
        mine = getattr(points[newest.summary.run_id], metric)
        if not _worse(metric, mine, worst):
            continue
        reason = f"{metric} {mine:.4g} is worse than every one of the last {len(previous)} run(s) "
        reason += f"(compare: significantly worse against each; their worst {worst:.4g})"
        out.append(Flag(metric=metric, newest=mine, worst_previous=worst, reason=reason))
    return out


def history(runs_dir: Path, scenario: str | None = None, window: int = WINDOW) -> History:
    """The series of `scenario` (default: the newest run's series) under runs_dir, and its newest run's verdict."""
    found = run_folders(runs_dir)
    readable = [(f, m) for f, m in found if m is not None]
    candidates = [(f, m) for f, m in readable if scenario is None or m.scenario.name == scenario]
    if not candidates:
        names = sorted({m.scenario.name for _, m in readable})
        raise ConfigError(
            f"no run of scenario {scenario!r} under {runs_dir} (scenarios there: {', '.join(names) or 'none'})"
            if scenario
            else f"no readable run folder under {runs_dir}"
        )
    key = series_key(candidates[-1][1])
    mine = [(f, m) for f, m in readable if series_key(m) == key]
    apart = [
        {"run_id": f.run_id, "series": series_key(m).text()} for f, m in readable if series_key(m) != key
    ]
    apart += [{"run_id": f.run_id, "series": "manifest unreadable"} for f, m in found if m is None]
    analyses = [analyse_folder(f) for f, _ in mine]
    points = {a.summary.run_id: p for a in analyses if (p := point(a)) is not None}
    apart += [
        {"run_id": a.summary.run_id, "series": "no requests"}
        for a in analyses
        if a.summary.run_id not in points
    ]
    kept = [a for a in analyses if a.summary.run_id in points]
    newest, previous = (kept[-1], kept[:-1][-window:]) if kept else (None, [])
    return History(
        key=key,
        points=[points[a.summary.run_id] for a in kept],
        flags=flags(newest, previous, points) if newest is not None else [],
        compared_with=[p.summary.run_id for p in previous],
        apart=apart,
    )

"""The load runs behind layers 2 and 3: ordinary run folders (the runner of `embedperf run`), analysed as
`embedperf report` does, and thermal throttling read from their telemetry as analysis.engine.minute_series
reads a soak's (the accelerators' clock falling while their temperature rises, first quarter against last).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.model.telemetry import ACCELERATOR_SOURCES
from analysis.run.analyse import analyse_run
from analysis.run.summary import RunAnalysis, write_analysis
from embedperf.errors import RunFolderError, TargetError
from embedperf.schema import RunFolder, read_telemetry_table
from loadgen.cli.runner import run_scenario_outcome
from loadgen.lifecycle.verdict import EXIT_INCOMPLETE, EXIT_USAGE
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import Check

RUN_MARGIN_S = 120.0  # beyond the planned length: start-up, drains and collectors
MIN_QUARTER_SAMPLES = 2  # seconds of telemetry in each quarter before throttling is judged


@dataclass(frozen=True)
class LoadOptions:
    """How verify's runs are made: where their folders go, and the telemetry options of `embedperf run`."""

    runs_dir: Path
    collectors: bool = True
    extra_args: list[str] = field(default_factory=list)
    overrides: dict[str, str] = field(default_factory=dict)  # scenario fields every run sets (target.model)


def run_and_analyse(
    scenario: str, host: str, options: LoadOptions, label: str, overrides: dict[str, str], planned_s: float
) -> RunAnalysis:
    """Run `scenario` against host and analyse its folder (summary.json written beside it); TargetError when
    it measured nothing, RunFolderError when it stopped early: either leaves its layer incomplete."""
    outcome = run_scenario_outcome(
        scenario,
        host,
        options.runs_dir,
        label=label,
        overrides={**options.overrides, **overrides},
        collectors=options.collectors,
        timeout_s=planned_s + RUN_MARGIN_S,
        extra_args=options.extra_args,
    )
    if outcome.folder is None or outcome.exit_code == EXIT_USAGE:
        raise TargetError(
            f"the {label} run measured nothing (exit {outcome.exit_code}); see its output above"
        )
    if outcome.exit_code == EXIT_INCOMPLETE:
        raise RunFolderError(f"the {label} run stopped before its end: {outcome.folder.root} is incomplete")
    analysis = analyse_run(outcome.folder)
    write_analysis(outcome.folder, analysis.summary)
    return analysis


def quarter_means(ts_s: np.ndarray, values: np.ndarray) -> tuple[float, float] | None:
    """(mean of the first quarter, mean of the last) of a per-second series; None when too short."""
    series = values[np.argsort(ts_s)]
    quarter = len(series) // 4
    if quarter < MIN_QUARTER_SAMPLES:
        return None
    return float(series[:quarter].mean()), float(series[-quarter:].mean())


def _per_second(ts_s: np.ndarray, values: np.ndarray, reduce: str) -> tuple[np.ndarray, np.ndarray]:
    keys, inverse = np.unique(np.floor(ts_s), return_inverse=True)
    out = np.full(len(keys), -np.inf if reduce == "max" else 0.0)
    if reduce == "max":
        np.maximum.at(out, inverse, values)
    else:
        np.add.at(out, inverse, values)
        out /= np.bincount(inverse)
    return keys, out


def throttling_checks(folder: RunFolder, thresholds: VerifyThresholds) -> list[Check]:
    """The throttling check when the run has both series (throttling_check)."""
    check = throttling_check(folder, thresholds.throttle_temp_rise_c, thresholds.throttle_clock_drop_pct)
    return [check] if check is not None else []


def throttling_check(folder: RunFolder, temp_rise_c: float, clock_drop_pct: float) -> Check | None:
    """Throttled when the accelerators' temperature rose by temp_rise_c or more (first quarter of the run
    to the last) while their clock fell by clock_drop_pct or more; None without both series."""
    table = read_telemetry_table(folder, ["ts_unix_s", "source", "metric", "value"])
    source = np.asarray(table["source"].to_pylist(), dtype=object)
    metric_names = np.asarray(table["metric"].to_pylist(), dtype=object)
    ts_s, values = table["ts_unix_s"].to_numpy(), table["value"].to_numpy()
    accelerator = np.isin(source, list(ACCELERATOR_SOURCES))
    pairs: dict[str, tuple[float, float] | None] = {}
    for metric, reduce in (("temp_c", "max"), ("clock_mhz", "mean")):
        mask = accelerator & (metric_names == metric)
        if not mask.any():
            return None
        seconds, per_second = _per_second(ts_s[mask], values[mask], reduce)
        pairs[metric] = quarter_means(seconds, per_second)
    temp, clock = pairs["temp_c"], pairs["clock_mhz"]
    if temp is None or clock is None or clock[0] <= 0:
        return None
    rise = temp[1] - temp[0]
    change_pct = (clock[1] / clock[0] - 1.0) * 100.0
    throttled = rise >= temp_rise_c and change_pct <= -clock_drop_pct
    return Check(
        name="thermal throttling",
        status="fail" if throttled else "pass",
        measured=f"temperature {rise:+.1f} C, clock {change_pct:+.1f}% (first to last quarter)",
        limit=f"not (rise >= {temp_rise_c:g} C and clock <= -{clock_drop_pct:g}%)",
    )

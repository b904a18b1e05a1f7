"""The run summary from rows loaded in memory: the reference the out-of-core analysis must equal."""

from __future__ import annotations

from analysis.model.telemetry import TelemetryIndex
from analysis.run.summary import RunSummary, Settings, is_open_loop, run_window, summarise
from embedperf.schema import RunFolder
from tests.oracles.in_memory.figures import telemetry_gaps
from tests.oracles.in_memory.load import RunData, load_run
from tests.oracles.in_memory.row_figures import row_figures


def analyse(data: RunData, settings: Settings | None = None) -> RunSummary:
    """The in-memory reference: the summary from rows loaded with pandas (see analysis/model/row_figures.py)."""
    settings = settings or Settings()
    rows = row_figures(data, is_open_loop(data.manifest), n_boot=settings.n_boot)
    index = TelemetryIndex.of_frame(data.telemetry)
    t0, t1 = run_window(data.manifest, rows.t_done_max_unix_s)
    gaps = telemetry_gaps(data.telemetry, t0, t1)
    sources = set(data.telemetry["source"].astype(str).unique()) if len(data.telemetry) else set()
    return summarise(data.manifest, rows, index, gaps, sources, settings)[0]


def load_and_analyse(folder: RunFolder, settings: Settings | None = None) -> RunSummary:
    """The reference summary of a run folder (rows in memory): small runs and the equality tests."""
    return analyse(load_run(folder), settings)



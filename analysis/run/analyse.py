"""One run analysed out of core: the summary and every figure input, none of the request rows in memory.

`analyse_folder(folder)` is what `embedperf report`, `compare` and `capacity` use for runs of any length:
DuckDB over the Parquet files with its memory capped and its spill folder under RUN_DIR/analysis/.
Pass 1 reads the request rows (analysis/engine/requests.py per-step statistics, analysis/engine/tables.py run-wide
figures, analysis/engine/minute_series.py series); pass 2 the telemetry (analysis/engine/telemetry.py), joined
by time, on the same connection (opening a DuckDB database costs about 30 ms of CPU); runs of under
ONE_THREAD_BELOW_ROWS rows on one DuckDB thread. `python -m analysis.run.analyse RUN_DIR` writes
RUN_DIR/analysis/summary.json alone.
"""

from __future__ import annotations

import sys
from typing import Any

from analysis.engine import minute_series, views
from analysis.engine import requests as ooc
from analysis.engine import tables as ooc_tables
from analysis.engine import telemetry as ooc_telemetry
from analysis.engine.figures import ReportFigures
from analysis.figures.soak import SOAK_MIN_DURATION_S, is_soak
from analysis.model.row_figures import RequestTotals, RowFigures
from analysis.model.slowest import slowest_requests_ooc
from analysis.run.summary import RunAnalysis, Settings, is_open_loop, run_window, summarise, write_analysis
from embedperf.schema import RunFolder, open_run_folder, read_manifest

MAX_SERIES_POINTS = 1500


def analyse_run(
    folder: RunFolder, settings: Settings | None = None, memory_limit: str = views.MEMORY_LIMIT
) -> RunAnalysis:
    settings = settings or Settings()
    manifest = read_manifest(folder)
    work = folder.analysis
    work.mkdir(parents=True, exist_ok=True)
    starts = [s.start_unix_s for s in manifest.stages]
    ends = [s.end_unix_s for s in manifest.stages if s.end_unix_s is not None]
    duration_s = max(ends) - min(starts) if starts and ends else 0.0  # first stage start to last stage end
    long_run = is_soak(manifest) or duration_s >= SOAK_MIN_DURATION_S  # gets per-minute series
    request_files = views.request_files(folder, work)
    telemetry_files = ooc_telemetry.telemetry_files(folder, work)
    threads = views.threads_for([*request_files, *telemetry_files])
    with views.connect(work, memory_limit, threads) as con:
        windows = views.create_views(con, request_files, manifest.stages)
        requests = ooc.request_aggregates(
            con, manifest.stages, windows, is_open_loop(manifest), n_boot=settings.n_boot,
            lateness_tolerance_ms=manifest.scenario.open_loop.lateness_tolerance_ms,
            fallback_model=manifest.service_info.fallback_model if manifest.service_info else None,
        )  # fmt: skip
        totals = ooc_tables.totals(con)
        t0, minutes = minute_series.request_minutes(con) if long_run else (None, [])
        done = con.execute("SELECT max(t_done_unix_s) FROM tagged WHERE isfinite(t_done_unix_s)").fetchone()
        t_done_max = float(done[0]) if done and done[0] is not None else None
        steps = requests.steps
        rows = RowFigures(
            stats=[s.stats for s in steps.values()],
            decomposition={i: s.decomposition for i, s in steps.items()},
            dropped=requests.dropped, warmup_trimmed=requests.warmup_trimmed,
            totals=RequestTotals.of(totals.n_requests, totals.n_ok, totals.errors_by_kind),
            outage_windows=ooc_tables.outage_windows(con), t_done_max_unix_s=t_done_max,
            soak=ooc_tables.soak_inputs(con, t0, minutes) if t0 is not None and is_soak(manifest) else None,
            slowest=slowest_requests_ooc(con), embeddings={i: s.n_embeddings for i, s in steps.items()},
        )  # fmt: skip
        run_t0, run_t1 = run_window(manifest, t_done_max)
        figures = ReportFigures(
            request_series=minute_series.request_series(con, run_t0 or 0.0, MAX_SERIES_POINTS)
            if t_done_max is not None else None, cdf_ms={i: s.cdf_ms for i, s in steps.items() if s.cdf_ms},
            batch_sizes=minute_series.batch_histograms(con), top_errors=minute_series.top_errors(con),
            lengths=ooc_tables.latency_by_input_tokens(con), embeddings=rows.embeddings,
            tokens={i: s.n_tokens for i, s in steps.items()}, minutes=minutes,
        )  # fmt: skip
        # pass 2, on the same connection: pass 1 materialised nothing, so it holds no memory here
        ooc_telemetry.create_view(con, telemetry_files)
        if t0 is not None and minutes:
            minute_series.prepare_telemetry_minutes(con, t0)
        index = ooc_telemetry.telemetry_index(con)
        gaps = ooc_telemetry.telemetry_gaps(con, run_t0, run_t1)
        summary, serving = summarise(manifest, rows, index, gaps, ooc_telemetry.sources(con), settings)
        if t0 is not None and minutes:
            minute_series.add_telemetry_minutes(con, minutes, serving.devices or None)
            summary.soak_minutes = minute_series.soak_findings(minutes)
    return RunAnalysis(summary=summary, manifest=manifest, folder=folder, telemetry=index, figures=figures)


def analyse_folder(folder: RunFolder, slo_p99_ms: float | None = None, **kwargs: Any) -> RunAnalysis:
    """analyse_run with its Settings from keyword options (slo_p99_ms, error_budget, target_qps, ...)."""
    return analyse_run(folder, Settings(slo_p99_ms=slo_p99_ms, **kwargs))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m analysis.run.analyse RUN_DIR", file=sys.stderr)
        return 2
    folder = open_run_folder(argv[0])
    print(write_analysis(folder, analyse_run(folder).summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The report of a run that Locust's web UI started: the builder the locustfiles register with the load side.

Cheap to import: pandas, DuckDB and matplotlib (reports.build) load when a report is first asked for, not
in every Locust process that never serves one.
"""

from __future__ import annotations

from pathlib import Path

from embedperf.schema import RunFolder


def build_run_report(folder: RunFolder) -> Path:
    """RUN_DIR/report.html in English, built from the run folder alone."""
    from reports.build import build_report

    return build_report(folder, lang="en")

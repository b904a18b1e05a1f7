"""Locust's own statistics (CSV and HTML) saved under RUN_DIR/locust/ for cross-checking."""

from __future__ import annotations

import csv
from pathlib import Path

from locust.env import Environment
from locust.html import get_html_report
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

LOCUST_PREFIX = "locust"


def write_locust_reports(environment: Environment, out_dir: Path) -> list[Path]:
    """`locust_stats.csv`, `locust_failures.csv`, `locust_exceptions.csv` and `report.html`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
    written = []
    for suffix, method in (
        ("stats", stats_csv.requests_csv), ("failures", stats_csv.failures_csv),
        ("exceptions", stats_csv.exceptions_csv),
    ):
        path = out_dir / f"{LOCUST_PREFIX}_{suffix}.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            method(csv.writer(fh))
        written.append(path)
    html_path = out_dir / "report.html"
    html_path.write_text(get_html_report(environment, show_download_link=False), encoding="utf-8")
    written.append(html_path)
    return written

"""The Locust web UI as embedperf's front end: a live tab (step figures, server timings, device telemetry),
the run folder, and a link to the run's report once it has ended, all through Locust's own extension points
(`template_args`' extended tabs, tables and csv files, `extended_stats` on `/stats/requests`, and Flask
routes). The report builder comes from the locustfile, through loadgen.wiring.plugin.install."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Response, request

from embedperf.errors import EmbedperfError
from embedperf.schema import RunFolder
from loadgen.recording.live import LATENCY_BUCKETS_MS, RunFollower

ReportBuilder = Callable[[RunFolder], Path]  # run folder -> its report.html, built from the folder alone

TAB_KEY = "embedperf"
TAB_TITLE = "embedperf live"
LIVE_ROUTE = "/embedperf/live"
REPORT_ROUTE = "/embedperf/report"
TABLE_STRUCTURE = [
    {"key": "figure", "title": "Figure"}, {"key": "value", "title": "Value"},
    {"key": "source", "title": "Source"},
]


@dataclass
class LiveRow:
    figure: str
    value: str
    source: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"name": self.figure, "figure": self.figure, "value": self.value, "source": self.source}


class WebUiFront:
    """What the live tab shows: the run the web UI started (or the last one), step by step."""

    def __init__(self, follower: RunFollower) -> None:
        self.follower = follower

    @property
    def last_folder(self) -> RunFolder | None:
        return self.follower.live.folder if self.follower.live is not None else None

    def rows(self) -> list[LiveRow]:
        live = self.follower()
        finished = self.follower.finished
        if live is None:
            return [LiveRow("run folder", "none yet: start a run", "")]
        rows = [LiveRow("run folder", str(live.folder.root), "finished" if finished else "running")]
        if finished:
            rows.append(LiveRow("report", REPORT_ROUTE.lstrip("/"), "Download Data tab; built on first open"))
        step = live.current_step
        if step is not None:
            load = f"{step.target_users} users" if step.target_users is not None else f"{step.target_rate} req/s"
            rows.append(LiveRow("step", f"{step.index} {step.label} ({load})", "recorded requests"))
            rows.append(LiveRow("requests", str(step.requests), "this step"))
            rows.append(LiveRow("goodput req/s", f"{step.goodput_rps:.1f}", "this step"))
            p50, p99 = step.latency_bound_ms(0.50), step.latency_bound_ms(0.99)
            rows.append(LiveRow("P50 / P99 ms", f"{_bound(p50)} / {_bound(p99)}", "this step, histogram bucket"))
            kinds = ", ".join(f"{k} {n}" for k, n in step.errors_by_kind.most_common()) or "none"
            rows.append(LiveRow("errors", f"{step.errors} ({kinds})", "this step"))
            for stage, mean_ms in step.server_mean_ms().items():
                rows.append(LiveRow(f"server {stage} ms (mean)", f"{mean_ms:.2f}", "Server-Timing, this step"))
        now = time.time()
        for (device, metric), sample in live.device_figures().items():
            age_s = max(0.0, now - sample.ts_unix_s)
            rows.append(LiveRow(f"{device} {metric}", f"{sample.value:g}", f"{sample.source}, {age_s:.0f} s ago"))
        return rows

    def live_json(self) -> dict[str, Any]:
        live = self.follower()
        finished = self.follower.finished
        step = live.current_step if live is not None else None
        return {
            "run_folder": str(live.folder.root) if live is not None else None,
            "running": self.follower.running,
            "finished": finished,
            "report": REPORT_ROUTE if finished else None,
            "step": None if step is None else {
                "index": step.index, "label": step.label, "requests": step.requests, "ok": step.ok,
                "goodput_rps": step.goodput_rps, "p50_ms_at_most": _finite(step.latency_bound_ms(0.50)),
                "p99_ms_at_most": _finite(step.latency_bound_ms(0.99)),
                "errors_by_kind": dict(step.errors_by_kind), "server_mean_ms": step.server_mean_ms(),
            },
            "devices": [
                {"device": d, "metric": m, "value": s.value, "source": s.source, "ts_unix_s": s.ts_unix_s}
                for (d, m), s in (live.device_figures().items() if live is not None else [])
            ],
        }


def _bound(value: float | None) -> str:
    """A histogram bound as the live tab shows it: "<= 250", "> 10000", or n/a before any answer."""
    if value is None:
        return "n/a"
    return f"> {LATENCY_BUCKETS_MS[-1]:g}" if math.isinf(value) else f"<= {value:g}"


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


def install(
    environment: Any, follower: RunFollower, check: Callable[[], object],
    build_report: ReportBuilder | None = None,
) -> WebUiFront:
    """Add the live tab, its data and the report route to the web UI. `build_report` makes a finished run's
    report.html; `check()` resolves the start form's scenario, its error answered to the form."""
    web_ui = environment.web_ui
    front = WebUiFront(follower)
    web_ui.template_args["extended_tabs"] = [{"title": TAB_TITLE, "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [{"key": TAB_KEY, "structure": TABLE_STRUCTURE}]
    web_ui.template_args["extended_csv_files"] = report_links(None)
    app = web_ui.app

    @app.before_request
    def _name_the_report() -> None:
        if request.endpoint == "locust.index":  # the page that renders template_args
            web_ui.template_args["extended_csv_files"] = report_links(front.last_folder)

    @app.after_request
    def _extend_stats(response: Response) -> Response:
        if not request.path.endswith("/stats/requests") or response.status_code != 200:
            return response
        body = response.get_json(silent=True)
        if isinstance(body, dict):
            rows = [row.as_dict() for row in front.rows()]
            body["extended_stats"] = [{"key": TAB_KEY, "data": rows}]
            response.set_data(json.dumps(body))
        return response

    @app.after_request
    def _check_swarm(response: Response) -> Response:
        if not request.path.endswith("/swarm") or request.method != "POST":
            return response
        body = response.get_json(silent=True)
        if isinstance(body, dict) and body.get("success"):
            try:
                check()
            except EmbedperfError as exc:
                if environment.runner is not None:
                    environment.runner.stop()
                body = {**body, "success": False, "message": f"embedperf: {exc}"}
                response.set_data(json.dumps(body))
        return response

    @app.route(LIVE_ROUTE)
    def _live() -> Response:
        return Response(json.dumps(front.live_json()), mimetype="application/json")

    @app.route(REPORT_ROUTE)
    def _report() -> Response:
        return report_response(front.last_folder, finished=follower.finished, build_report=build_report)

    return front


def report_links(folder: RunFolder | None) -> list[dict[str, str]]:
    """The Download Data tab's link to the last run's report (named after its run folder)."""
    title = f"embedperf report of {folder.run_id} (report.html)" if folder else "embedperf report of the last run"
    return [{"href": "." + REPORT_ROUTE, "title": title}]


def report_response(folder: RunFolder | None, finished: bool, build_report: ReportBuilder | None = None) -> Response:
    """The last run's report.html, built from its run folder when it is not there yet."""
    if folder is None:
        return _text("no run has been started from this Locust yet", 404)
    if not finished:
        return _text(f"the run is still going; its report is built when it ends ({folder.root})", 409)
    report: Path = folder.report
    if not report.is_file():
        if build_report is None:
            return _text(
                f"no report.html in {folder.root} and this locustfile registered no report builder: "
                f"run `embedperf report {folder.root}`", 404,
            )
        report = build_report(folder)
    return Response(report.read_bytes(), mimetype="text/html")


def _text(message: str, status: int) -> Response:
    return Response(message, status=status, mimetype="text/plain")

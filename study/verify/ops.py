"""Layer 4, operational readiness: probes that mean what they say, the metrics monitoring reads, request IDs,
and alert rules that are loaded and have fired.

Readiness is judged from the start-up timeline (study.verify.startup): ready while embeddings still fail
routes traffic to a replica that cannot serve. Without a timeline, loading is reported as not observed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from embedperf.schema import REQUEST_ID_HEADER
from study.verify.prometheus import MonitoringNeeds, PrometheusAPI, alert_names
from study.verify.startup import Observation, StartedService
from study.verify.target import MetricsSnapshot, TargetClient
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import Check

LOG_WAIT_S = 10.0  # a guard while the access log line is flushed, not a performance bound
LOG_POLL_S = 0.2
NAMES_SHOWN = 8
READINESS = "readiness false while the model loads"
LIVENESS = "liveness separate from readiness"
LOGS = "logs searchable by request ID"
ALERTS = "alert rules loaded and fired"


def _span(observations: Sequence[Observation]) -> str:
    return f"{observations[0].t_s:.1f}-{observations[-1].t_s:.1f} s"


def startup_checks(timeline: Sequence[Observation], health_path: str, ready_path: str) -> list[Check]:
    """Readiness false while the model loads; liveness answering meanwhile (from the start-up polls)."""
    lies = [o for o in timeline if o.ready == 200 and o.embed is not None and o.embed != 200]
    loading = [o for o in timeline if o.ready not in (0, 200)]
    live_loading = [o for o in loading if o.health == 200]
    served = next((o for o in timeline if o.embed == 200), None)
    first = next((o for o in timeline if o.health or o.ready), None)
    if lies:
        readiness = Check(
            name=READINESS,
            status="fail",
            measured=f"{ready_path} answered 200 at {_span(lies)} while POST /v1/embeddings answered "
            f"{sorted({o.embed or 0 for o in lies})} ({len(lies)} polls)",
            note="readiness is true before the model loads: traffic would reach a replica that cannot serve",
        )
    elif loading:
        measured = f"{ready_path} {sorted({o.ready for o in loading})} at {_span(loading)}, then 200 with "
        measured += f"embeddings answering at {served.t_s if served else float('nan'):.1f} s"
        readiness = Check(name=READINESS, status="pass", measured=measured)
    else:
        measured = f"loading not observed: {ready_path} was ready from the first answer "
        measured += f"({first.t_s if first else float('nan'):.1f} s)"
        readiness = Check(name=READINESS, status="warn", measured=measured)
    if live_loading:
        measured = f"{health_path} 200 while {ready_path} was not ({_span(live_loading)})"
        liveness = Check(name=LIVENESS, status="pass", measured=measured)
    elif loading:
        liveness = Check(
            name=LIVENESS,
            status="fail",
            measured=f"{health_path} did not answer 200 while loading ({sorted({o.health for o in loading})})",
            note="an orchestrator would restart a service that is only loading its model",
        )
    else:
        measured = f"not shown: {ready_path} was never false, so the two could not be told apart"
        liveness = Check(name=LIVENESS, status="warn", measured=measured)
    return [readiness, liveness]


def standing_checks(client: TargetClient, health_path: str, ready_path: str) -> list[Check]:
    """Without a start-up to watch: both probes exist, answer and differ; loading not observed."""
    health, ready = client.get(health_path), client.get(ready_path)
    exists = Check(
        name="liveness and readiness endpoints",
        status="pass" if health.ok and ready.ok else "fail",
        measured=f"{health_path} {health.describe()}, {ready_path} {ready.describe()}",
        limit="200 each on a serving target",
    )
    distinct = health.ok and ready.ok and health.body != ready.body
    note = "pass --start-cmd so verify starts the service and polls its probes from the first second"
    return [
        exists,
        Check(
            name=LIVENESS,
            status="pass" if distinct else "warn",
            measured="different answers" if distinct else "the same answer (or one is missing)",
            note="" if distinct else "two paths over one check cannot tell loading from dead",
        ),
        Check(name=READINESS, status="warn", measured="loading not observed", note=note),
    ]


def metrics_check(snapshot: MetricsSnapshot | None, needs: MonitoringNeeds, metrics_path: str) -> Check:
    if snapshot is None:
        return Check(name="metrics for dashboards and alerts", status="fail", measured=f"no {metrics_path}")
    missing = sorted(needs.names - snapshot.names)
    shown = ", ".join(missing[:NAMES_SHOWN]) + (
        f" and {len(missing) - NAMES_SHOWN} more" if len(missing) > NAMES_SHOWN else ""
    )
    return Check(
        name="metrics for dashboards and alerts",
        status="fail" if missing else "pass",
        measured=f"missing: {shown}" if missing else f"all {len(needs.names)} names exposed",
        limit=f"the service metrics read by {needs.source}",
    )


def request_id_checks(client: TargetClient, log_text: Callable[[], str] | None) -> list[Check]:
    """X-Request-ID echoed (and made up when absent); with the service's output at hand, found in its log."""
    sent = f"verify-{uuid.uuid4().hex}"
    echoed = client.embed(["embedperf verify request id"], request_id=sent)
    made = client.embed(["embedperf verify request id, none sent"])
    got, new = echoed.headers.get(REQUEST_ID_HEADER.lower()), made.headers.get(REQUEST_ID_HEADER.lower())
    checks = [
        Check(
            name="responses carry request IDs",
            status="pass" if got == sent and new else "fail",
            measured=f"sent {sent}: {'echoed' if got == sent else f'answered {got!r}'}; none sent: "
            f"{'one made up' if new else 'none'}",
            limit=f"{REQUEST_ID_HEADER} echoed, or made up when absent",
        )
    ]
    if log_text is None:
        note = "pass --start-cmd so verify captures the service's output"
        return [*checks, Check(name=LOGS, status="warn", measured="not checked", note=note)]
    deadline = time.monotonic() + LOG_WAIT_S
    while not (found := sent in log_text()) and time.monotonic() < deadline:
        time.sleep(LOG_POLL_S)
    checks.append(
        Check(
            name=LOGS,
            status="pass" if found else "warn",
            measured=f"{sent} {'found' if found else 'not found'} in the service's output",
            note="" if found else "its access log may go to a file (--access-log)",
        )
    )
    return checks


def alert_checks(prometheus_url: str | None, rule_files: list[Path], lookback_s: float) -> list[Check]:
    """The shipped alerts loaded in Prometheus, and each fired within the look-back window."""
    if prometheus_url is None:
        note = "pass --prometheus-url of the Prometheus that evaluates the shipped rules"
        return [Check(name=ALERTS, status="warn", measured="not checked", note=note)]
    if not (wanted := alert_names(rule_files)):
        return [Check(name=ALERTS, status="warn", measured="no alert rules found", note="pass --rules FILE")]
    api = PrometheusAPI(prometheus_url)
    loaded = api.loaded_alerts()
    not_loaded = [name for name in wanted if name not in loaded]
    fired = api.fired_alerts(lookback_s)
    silent = [name for name in wanted if name in loaded and name not in fired]
    n_fired = len(wanted) - len(not_loaded)
    drill = "run a fault drill for each (an alert never seen firing is not known to work)"
    return [
        Check(
            name="alert rules loaded",
            status="fail" if not_loaded else "pass",
            measured=f"not loaded: {', '.join(not_loaded)}" if not_loaded else f"all {len(wanted)} loaded",
            limit=", ".join(p.name for p in rule_files),
        ),
        Check(
            name="every alert has fired",
            status="fail" if silent else "pass",
            measured=f"never fired: {', '.join(silent)}" if silent else f"all {n_fired} fired",
            limit=f'within {lookback_s:g} s before now (ALERTS{{alertstate="firing"}})',
            note=drill if silent else "",
        ),
    ]


def ops_checks(
    client: TargetClient,
    thresholds: VerifyThresholds,
    service: StartedService | None,
    needs: MonitoringNeeds,
    prometheus_url: str | None,
    rule_files: list[Path],
) -> list[Check]:
    """Every check of layer 4, in the report's order."""
    probes = (
        startup_checks(service.timeline, thresholds.health_path, thresholds.ready_path)
        if service is not None
        else standing_checks(client, thresholds.health_path, thresholds.ready_path)
    )
    return [
        *probes,
        metrics_check(client.metrics(thresholds.metrics_path), needs, thresholds.metrics_path),
        *request_id_checks(client, service.log_text if service else None),
        *alert_checks(prometheus_url, rule_files, thresholds.prometheus_lookback_s),
    ]

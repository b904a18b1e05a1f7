"""Layer 4's judgements: readiness from the start-up polls, the metric names monitoring reads, request IDs."""

from __future__ import annotations

from pathlib import Path

from service.metrics import ServiceMetrics
from study.verify.ops import metrics_check, startup_checks
from study.verify.prometheus import (
    DASHBOARDS_GLOB,
    DEPLOY_DIR,
    MonitoringNeeds,
    alert_names,
    monitoring_needs,
    service_metric_names,
    shipped_rule_files,
)
from study.verify.startup import Observation, start_command
from study.verify.target import InfoSnapshot, parse_metrics

HEALTH, READY = "/health", "/ready"


def by_name(checks: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {c.name: c.status for c in checks}


def test_ready_before_the_model_loads_fails_and_says_so() -> None:
    timeline = [
        Observation(0.0, 0, 0),
        Observation(0.3, 200, 200, 503),
        Observation(0.6, 200, 200, 503),
        Observation(0.9, 200, 200, 200),
    ]
    checks = startup_checks(timeline, HEALTH, READY)
    readiness = checks[0]
    assert readiness.status == "fail"
    assert (
        "/ready answered 200 at 0.3-0.6 s while POST /v1/embeddings answered [503] (2 polls)"
        in readiness.measured
    )
    assert "readiness is true before the model loads" in readiness.note


def test_a_service_that_loads_behind_a_false_readiness_passes() -> None:
    timeline = [
        Observation(0.0, 0, 0),
        Observation(0.2, 200, 503),
        Observation(4.4, 200, 503),
        Observation(4.6, 200, 200, 200),
    ]
    assert by_name(startup_checks(timeline, HEALTH, READY)) == {
        "readiness false while the model loads": "pass",
        "liveness separate from readiness": "pass",
    }


def test_liveness_failing_while_loading_fails_and_a_load_not_seen_warns() -> None:
    dead_while_loading = [Observation(0.2, 503, 503), Observation(0.4, 200, 200, 200)]
    assert by_name(startup_checks(dead_while_loading, HEALTH, READY)) == {
        "readiness false while the model loads": "pass",
        "liveness separate from readiness": "fail",
    }
    instant = [Observation(0.0, 0, 0), Observation(0.2, 200, 200, 200)]
    assert by_name(startup_checks(instant, HEALTH, READY)) == {
        "readiness false while the model loads": "warn",
        "liveness separate from readiness": "warn",
    }


def test_metrics_check_names_what_is_missing() -> None:
    needs = MonitoringNeeds(frozenset({"embedperf_ready", "embedperf_requests_total"}), "rules.yml")
    exposed = parse_metrics("# TYPE embedperf_ready gauge\nembedperf_ready 1.0\n")
    check = metrics_check(exposed, needs, "/metrics")
    assert check.status == "fail" and check.measured == "missing: embedperf_requests_total"
    assert metrics_check(None, needs, "/metrics").status == "fail"
    full = parse_metrics(
        "# TYPE embedperf_ready gauge\nembedperf_ready 1.0\n"
        '# TYPE embedperf_requests counter\nembedperf_requests_total{status="200"} 3.0\n'
        'embedperf_requests_total{status="503"} 1.0\n'
    )
    assert metrics_check(full, needs, "/metrics").status == "pass"
    assert full.totals["embedperf_requests_total"] == 4.0


def test_a_labelled_counter_without_samples_still_counts_as_exposed() -> None:
    """The reference service's registry before any request: families declared, no labelled samples yet. They
    are the service names verify asks for (less prometheus_client's `_created` series: no monitoring reads
    them)."""
    names = parse_metrics(ServiceMetrics().render().decode()).names
    assert {"embedperf_requests_total", "embedperf_stage_duration_seconds_bucket", "embedperf_ready"} <= names
    assert service_metric_names() == {name for name in names if not name.endswith("_created")}


def test_the_monitoring_needs_come_from_the_shipped_rules_and_dashboard() -> None:
    rules = shipped_rule_files()
    dashboards = sorted(DEPLOY_DIR.glob(DASHBOARDS_GLOB))
    assert rules and all(not p.name.endswith(".test.yml") for p in rules)
    needs = monitoring_needs(rules, dashboards)
    # what the alert rules query on the service
    assert {"embedperf_requests_total", "embedperf_stage_duration_seconds_bucket", "embedperf_ready",
            "embedperf_fallback_requests_total", "embedperf_device_errors_total"} <= needs.names  # fmt: skip
    # the agent's device figures and a run's live export are not asked of the service
    assert "embedperf_temp_c" not in needs.names and "embedperf_goodput_rps" not in needs.names
    assert needs.names <= service_metric_names()
    assert "EmbedperfServiceNotReady" in alert_names(rules)


def test_without_rules_or_dashboards_every_declared_name_is_needed(tmp_path: Path) -> None:
    needs = monitoring_needs([], [])
    assert needs.names == service_metric_names() and "service/metrics.py" in needs.source


def test_start_command_and_restart_detection() -> None:
    assert start_command("embedperf serve --port {port} --model-name 'a b'", "http://127.0.0.1:8123") == [
        "embedperf", "serve", "--port", "8123", "--model-name", "a b"
    ]  # fmt: skip
    first = InfoSnapshot(pid=10, started_unix_s=1.0, dimension=384, model="m")
    assert first.same_process(InfoSnapshot(pid=10, started_unix_s=1.0, dimension=384, model="m")) is True
    assert first.same_process(InfoSnapshot(pid=11, started_unix_s=2.0, dimension=384, model="m")) is False
    assert InfoSnapshot(None, None, None, None).same_process(first) is None

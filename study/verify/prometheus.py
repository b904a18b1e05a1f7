"""What the shipped monitoring needs and whether a Prometheus proves it: metric names, loaded and fired alerts.

The shipped rules (deploy/prometheus/*.yml, promtool tests left out) and dashboards (deploy/grafana/*.json)
name the metrics a service must expose; `SERVICE_FAMILIES` says which of them are a service's (the rest are
the agent's or a run's). An alert is loaded when /api/v1/rules lists it, and fired when it fires now or its
`ALERTS{alertstate="firing"}` series (written at every evaluation while it fires) has a sample within the
look-back window.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from collectors.prometheus_pull import prometheus_data
from embedperf.errors import ConfigError, TargetError
from study.verify.target import parse_metrics

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"
RULES_GLOB = "prometheus/*.yml"
RULE_TESTS_SUFFIX = ".test.yml"
DASHBOARDS_GLOB = "grafana/*.json"
METRIC_NAME = re.compile(r"\bembedperf_[a-z0-9_]+\b")
API_TIMEOUT_S = 10.0
SERVICE_FAMILIES = {  # embedperf_<name> by type, as service/metrics.py has them (a test holds the two equal)
    "counter": "requests route_requests served_requests fallback_requests compute_seconds device_batches "
    "tokens device_compute_seconds padded_tokens bucket_batches inputs cache_hits cache_misses cache_errors "
    "shed abandoned stopped_batches oom_splits device_errors",
    "gauge": "queue_depth inflight_requests workers device_busy_fraction cache_up ready batch_limit "
    "estimated_wait_seconds",
    "histogram": "stage_duration_seconds batch_size batch_tokens",
}


def shipped_rule_files(deploy_dir: Path = DEPLOY_DIR) -> list[Path]:
    return sorted(p for p in deploy_dir.glob(RULES_GLOB) if not p.name.endswith(RULE_TESTS_SUFFIX))


def _rules(path: Path) -> list[dict[str, Any]]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the alert rules {path}: {exc}") from exc
    groups = document.get("groups") if isinstance(document, dict) else None
    if not isinstance(groups, list):
        raise ConfigError(f"{path} is not a Prometheus rules file (no `groups:` list)")
    return [rule for group in groups for rule in group.get("rules") or [] if isinstance(rule, dict)]


def alert_names(rule_files: list[Path]) -> list[str]:
    """Every alert the rule files define, in file order."""
    return [str(rule["alert"]) for path in rule_files for rule in _rules(path) if "alert" in rule]


def _dashboard_exprs(value: Any) -> list[str]:
    """Every `expr` anywhere in a Grafana dashboard (panels, nested rows, templating)."""
    if isinstance(value, dict):
        own = [value["expr"]] if isinstance(value.get("expr"), str) else []
        return own + [e for v in value.values() for e in _dashboard_exprs(v)]
    if isinstance(value, list):
        return [e for v in value for e in _dashboard_exprs(v)]
    return []


def service_metric_names() -> frozenset[str]:
    """Every sample name the reference service declares (SERVICE_FAMILIES, none observed yet)."""
    text = "".join(f"# TYPE embedperf_{n} {k}\n" for k, v in SERVICE_FAMILIES.items() for n in v.split())
    return parse_metrics(text).names


@dataclass(frozen=True)
class MonitoringNeeds:
    """The service metric names the monitoring reads, and where they were read from."""

    names: frozenset[str]
    source: str


def monitoring_needs(rule_files: list[Path], dashboards: list[Path]) -> MonitoringNeeds:
    """Names of service metrics the rules and dashboards query; without either, all the service declares."""
    declared = service_metric_names()
    exprs = [str(rule.get("expr", "")) for path in rule_files for rule in _rules(path)]
    for path in dashboards:
        try:
            exprs += _dashboard_exprs(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the dashboard {path}: {exc}") from exc
    if not exprs:
        return MonitoringNeeds(declared, "service/metrics.py (no shipped rules or dashboards found)")
    used = {name for expr in exprs for name in METRIC_NAME.findall(expr)}
    files = ", ".join(p.name for p in [*rule_files, *dashboards])
    return MonitoringNeeds(frozenset(used & declared), files)


class PrometheusAPI:
    """The few calls of Prometheus' HTTP API verify makes; errors name the URL and what to check."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def get(self, path: str, **params: str) -> Any:
        return prometheus_data(self.url, path, params, API_TIMEOUT_S, TargetError)

    def loaded_alerts(self) -> set[str]:
        data = self.get("/api/v1/rules", type="alert")
        return {
            str(rule["name"])
            for group in data.get("groups", [])
            for rule in group.get("rules", [])
            if rule.get("type") == "alerting"
        }

    def fired_alerts(self, lookback_s: float) -> set[str]:
        """Alerts with a firing sample within lookback_s before now, or firing now."""
        query = (
            f'max by (alertname) (max_over_time(ALERTS{{alertstate="firing"}}[{max(int(lookback_s), 1)}s]))'
        )
        fired = {
            str(r["metric"].get("alertname"))
            for r in self.get("/api/v1/query", query=query).get("result", [])
        }
        now = {
            str(a["labels"].get("alertname"))
            for a in self.get("/api/v1/alerts").get("alerts", [])
            if a.get("state") == "firing"
        }
        return fired | now

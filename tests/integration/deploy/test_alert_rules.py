"""The shipped alert rules and dashboard against promtool: valid, equal to their renderer's output, and
each alert fires on synthetic series past its threshold and `for:` (deploy/prometheus/*.test.yml)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.integration.deploy.prometheus_stack import (
    RENDER_RULES,
    RULES,
    RULES_TESTS,
    dashboard_targets,
    promtool,
    render_rules,
)

ALERTS = {
    "EmbedperfServiceErrorRate",
    "EmbedperfServiceP99OverSLO",
    "EmbedperfServiceNotReady",
    "EmbedperfFallbackActive",
    "EmbedperfServiceDeviceErrors",
    "EmbedperfAgentDown",
    "EmbedperfDeviceTemperatureHigh",
    "EmbedperfDeviceMemoryHigh",
    "EmbedperfDeviceUnhealthy",
}


def alert_names(path: Path) -> set[str]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {rule["alert"] for group in document["groups"] for rule in group["rules"]}


def test_promtool_accepts_the_shipped_rules_and_refuses_a_broken_copy(tmp_path: Path) -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    broken = tmp_path / "broken.yml"
    broken.write_text(
        RULES.read_text(encoding="utf-8").replace("> 85", "> > 85", 1), encoding="utf-8"
    )  # one PromQL syntax error
    refused = promtool("check", "rules", str(broken))
    assert refused.returncode != 0 and "EmbedperfDeviceTemperatureHigh" in refused.stdout + refused.stderr


def test_the_renderer_documents_every_threshold_and_refuses_a_bad_one(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(RENDER_RULES), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "--p99-slo-ms" in done.stdout and "% of the total" in done.stdout
    bad = subprocess.run(
        [sys.executable, str(RENDER_RULES), "--error-ratio-max", "2"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "--error-ratio-max" in bad.stderr and not bad.stdout


def test_the_shipped_rules_are_the_renderers_defaults(tmp_path: Path) -> None:
    rendered = render_rules(tmp_path / "defaults.yml")
    assert rendered.read_text(encoding="utf-8") == RULES.read_text(encoding="utf-8"), (
        "deploy/prometheus/embedperf-alerts.yml differs from `python deploy/render_rules.py`: regenerate it"
    )
    assert alert_names(RULES) == ALERTS


def test_every_alert_fires_in_promtool_unit_tests(tmp_path: Path) -> None:
    done = promtool("test", "rules", str(RULES_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULES_TESTS.read_text(encoding="utf-8"))["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert tested == ALERTS, f"alerts without a firing case: {sorted(ALERTS - tested)}"


def test_the_unit_tests_catch_a_changed_threshold_and_window(tmp_path: Path) -> None:
    """The same unit tests against rules rendered with a higher temperature limit and a shorter P99
    `for:` fail on exactly those two alerts."""
    shutil.copy(RULES_TESTS, tmp_path / RULES_TESTS.name)
    render_rules(tmp_path / RULES.name, "--temp-max-c", "88", "--p99-for-s", "120")
    done = promtool("test", "rules", str(tmp_path / RULES_TESTS.name))
    assert done.returncode != 0
    report = done.stdout + done.stderr
    failed = set(re.findall(r"alertname: (\w+), time:", report))
    assert failed == {"EmbedperfDeviceTemperatureHigh", "EmbedperfServiceP99OverSLO"}, report


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """Each panel query as a recording rule: promtool parses them all (the live test shows they return data)."""
    targets = dashboard_targets()
    assert len(targets) >= 20
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"panel:q{i}", "expr": e} for i, (_, e) in enumerate(targets)],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dashboard = json.loads((RULES.parents[1] / "grafana" / "embedperf.json").read_text(encoding="utf-8"))
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(
        p.get("datasource", {}).get("uid") == "${datasource}"
        for p in dashboard["panels"]
        if p["type"] != "row"
    )

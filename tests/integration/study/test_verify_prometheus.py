"""Layer 4's alert check against a real Prometheus (the Debian package): a rule it does not load and a rule
that never fired each fail by name; rules that are loaded and have fired pass, also one that fired earlier
and has stopped (only the ALERTS history shows it)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from study.verify.ops import alert_checks
from study.verify.prometheus import PrometheusAPI
from tests.integration.deploy.prometheus_stack import running_prometheus, wait_for

LOOKBACK_S = 600.0
RULES = """\
groups:
- name: verify-test
  rules:
  - alert: VerifyAlwaysFires
    expr: vector(1)
    labels: {severity: info}
  - alert: VerifyNeverFires
    expr: vector(0) > 1
    labels: {severity: info}
  - alert: VerifyFiredBefore
    expr: vector(time()) < UNTIL
    labels: {severity: info}
"""
FIRING_S = 3.0  # how long VerifyFiredBefore fires after the rules are written; then it only has a history
NOT_LOADED = """\
groups:
- name: verify-extra
  rules:
  - alert: VerifyNotLoaded
    expr: vector(1)
"""


def test_alert_rules_must_be_loaded_and_have_fired(tmp_path: Path) -> None:
    rules, extra = tmp_path / "rules.yml", tmp_path / "extra.yml"
    rules.write_text(RULES.replace("UNTIL", "0"), encoding="utf-8")
    extra.write_text(NOT_LOADED, encoding="utf-8")
    with running_prometheus(tmp_path, {}, (rules,)) as prom:
        api = PrometheusAPI(prom.url)
        wait_for(
            lambda: "VerifyAlwaysFires" in api.fired_alerts(LOOKBACK_S) or None, "VerifyAlwaysFires firing"
        )
        # VerifyFiredBefore fires for FIRING_S from now (the rules reloaded with SIGHUP), then only its history is left
        rules.write_text(RULES.replace("UNTIL", f"{time.time() + FIRING_S:.3f}"), encoding="utf-8")
        prom.proc.send_signal(signal.SIGHUP)
        wait_for(
            lambda: "VerifyFiredBefore" in api.fired_alerts(LOOKBACK_S) or None, "VerifyFiredBefore fired"
        )

        def stopped() -> bool | None:
            active = {a["labels"]["alertname"] for a in api.get("/api/v1/alerts")["alerts"]}
            return "VerifyFiredBefore" not in active or None

        wait_for(stopped, "VerifyFiredBefore resolved")
        loaded, fired = alert_checks(prom.url, [rules], LOOKBACK_S)
        assert (loaded.status, loaded.measured) == ("pass", "all 3 loaded")
        assert (fired.status, fired.measured) == ("fail", "never fired: VerifyNeverFires")
        missing, _ = alert_checks(prom.url, [rules, extra], LOOKBACK_S)
        assert (missing.status, missing.measured) == ("fail", "not loaded: VerifyNotLoaded")
        always = tmp_path / "always.yml"
        always.write_text(RULES.split("  - alert: VerifyNeverFires")[0], encoding="utf-8")
        assert [c.status for c in alert_checks(prom.url, [always], LOOKBACK_S)] == ["pass", "pass"]

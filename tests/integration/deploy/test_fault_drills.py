"""Fault drills: the shipped rules, rendered with short windows, in a real Prometheus scraping a real
reference service and an `embedperf agent` on the fake npu-smi. Each fault fires its own alert, on the
faulty service or device only, and nothing else fires:

- over-temperature: npu15 runs at 87 C (the fake npu-smi: a busy NPU reports 72 + its ID);
- device error: npu3's Health column reads Alarm;
- service errors: the service's deadline (1 ms) cannot be met, so every request is answered 503;
- the service killed: SIGKILL, and Prometheus finds it down.
"""

from __future__ import annotations

import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import start_service, stop_process
from tests.integration.deploy.prometheus_stack import (
    AGENT_JOB,
    SERVICE_JOB,
    Prometheus,
    render_rules,
    running_agent,
    running_prometheus,
    wait_for,
)

# Windows short enough for a test; the thresholds stay the shipped ones.
SHORT_WINDOWS = [
    "--rate-window-s", "10",
    "--error-for-s", "5", "--p99-for-s", "5", "--down-for-s", "5", "--temp-for-s", "5",
    "--mem-for-s", "5", "--device-for-s", "0", "--fallback-for-s", "5",
]  # fmt: skip
FAKE_NPUS = {"FAKE_NPU_IDS": "0,3,15", "FAKE_NPU_BUSY_IDS": "15", "FAKE_NPU_HEALTH": "3=Alarm"}
MOST_REQUESTS = 5000  # bounds the error load: the alert is expected after a few hundred
Key = tuple[str, str]  # (alertname, the service instance or the device it is about)


def key(alert: dict[str, Any]) -> Key:
    labels = alert["labels"]
    return labels["alertname"], labels.get("device") or labels.get("instance", "")


class AlertLog:
    """Every alert Prometheus reported as pending or firing, in the phase it was first seen."""

    def __init__(self, prometheus: Prometheus) -> None:
        self.prometheus = prometheus
        self.phase = "baseline"
        self.seen: dict[Key, str] = {}  # alert -> phase it was first active in
        # alert -> when its condition first held (Prometheus' activeAt)
        self.active_since: dict[Key, float] = {}
        self.firing_seen: dict[Key, float] = {}  # alert -> when this log first saw it firing

    def firing_now(self, wanted: Key) -> bool | None:
        """Poll /api/v1/alerts once; True when `wanted` is firing (None to keep waiting)."""
        for alert in self.prometheus.alerts():
            self.seen.setdefault(key(alert), self.phase)
            self.active_since.setdefault(key(alert), datetime.fromisoformat(alert["activeAt"]).timestamp())
            if alert["state"] == "firing":
                self.firing_seen.setdefault(key(alert), time.time())
        return (wanted in self.firing_seen) or None


def send_errors(url: str, stop: threading.Event, answers: list[int]) -> None:
    """Embedding requests back to back until `stop` (at most MOST_REQUESTS), recording each status."""
    with httpx.Client(timeout=30) as client:
        while not stop.is_set() and len(answers) < MOST_REQUESTS:
            resp = client.post(f"{url}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": "drill"})
            answers.append(resp.status_code)


def test_each_fault_fires_its_own_alert_and_nothing_else(tmp_path: Path) -> None:
    rules = render_rules(tmp_path / "embedperf-alerts.yml", *SHORT_WINDOWS)
    service, url = start_service(["--deadline-ms", "1", "--access-log", "off"], tmp_path / "service.log")
    instance = url.removeprefix("http://")
    try:
        with (
            running_agent(tmp_path, FAKE_NPUS) as agent,
            running_prometheus(
                tmp_path, {SERVICE_JOB: [instance], AGENT_JOB: [agent]}, (rules,)
            ) as prometheus,
        ):
            log = AlertLog(prometheus)
            hot, alarmed = (
                ("EmbedperfDeviceTemperatureHigh", "npu15.chip0"),
                ("EmbedperfDeviceUnhealthy", "npu3.chip0"),
            )
            wait_for(lambda: log.firing_now(hot), "over-temperature alert on npu15 firing")
            wait_for(lambda: log.firing_now(alarmed), "device alert on npu3 firing")

            log.phase = "errors"
            errors = ("EmbedperfServiceErrorRate", instance)
            stop, answers = threading.Event(), list[int]()
            errors_from = time.time()
            sender = threading.Thread(target=send_errors, args=(url, stop, answers), daemon=True)
            sender.start()
            try:
                wait_for(lambda: log.firing_now(errors), "error-rate alert firing on the failing service")
            finally:
                stop.set()
                sender.join(30)
            assert answers and set(answers) <= {503, 429}, sorted(set(answers))

            log.phase = "killed"
            down = ("EmbedperfServiceNotReady", instance)
            killed_at = time.time()
            service.send_signal(signal.SIGKILL)
            service.wait(30)
            wait_for(lambda: log.firing_now(down), "not-ready alert firing on the killed service")
    finally:
        stop_process(service)

    assert log.seen == {hot: "baseline", alarmed: "baseline", errors: "errors", down: "killed"}, (
        "an alert other than the drilled one fired, or one fired before its fault"
    )
    # each alert's condition first held after its fault began (Prometheus' own activeAt)
    assert log.active_since[errors] >= errors_from and log.active_since[down] >= killed_at
    for name, start in ((errors, errors_from), (down, killed_at)):
        print(f"drill {name[0]}: active {log.active_since[name] - start:.1f} s and firing "
              f"{log.firing_seen[name] - start:.1f} s after the fault (for: 5s, scrape 1 s)")  # fmt: skip

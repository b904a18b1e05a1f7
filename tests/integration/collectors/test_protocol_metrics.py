"""The collectors' service source reads another server's own Prometheus names once its target protocol maps
them: TEI's queue gauge and batch histogram (the TEI stub, TEI's names and exposition), and KServe's predict
histogram as busy fraction and request rate (a real KServe model server). Two scrapes with known requests
between them, so every figure is a known one."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from collectors.config import CollectorConfig
from collectors.service_metrics import ServiceMetricsSource
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols import registry
from scenarios.models import Target
from tests.fakes.tei_stub import TeiStubConfig, running_tei_stub
from tests.peers.kserve_launch import KSERVE_MODEL_NAME
from tests.peers.shared import SharedPeer


def source(url: str, protocol: str, out_dir: Path) -> ServiceMetricsSource:
    names = dict(registry.get(protocol).metric_names)
    config = CollectorConfig(out_dir=out_dir, service_url=url, sources=("service",), service_metrics=names)
    src = ServiceMetricsSource(config)
    src.start()
    return src


def scrape(src: ServiceMetricsSource) -> dict[str, float]:
    return {metric: value for _, metric, value in src.sample(time.time())}


def send(url: str, protocol: str, model: str, inputs: int, requests: int) -> None:
    """Requests as the load sends them (the protocol's body), each answered before the next."""
    proto = registry.get(protocol)
    target = registry.default_target(Target.model_validate({"protocol": protocol, "model": model}), "embed")
    payload = RequestPayload([f"text number {i}" for i in range(inputs)], target.path)
    for _ in range(requests):
        answer = httpx.post(
            url + target.path,
            content=proto.request_body(payload, "embed", target),
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text


def test_tei_queue_and_batch_figures(tmp_path: Path) -> None:
    with running_tei_stub(TeiStubConfig(delay_ms=2)) as url:
        src = source(url, "tei", tmp_path)
        try:
            send(url, "tei", "", inputs=1, requests=1)  # TEI writes a series once it has been recorded
            first = scrape(src)
            send(url, "tei", "", inputs=4, requests=3)
            second = scrape(src)
        finally:
            src.close()
    assert first == {"queue_depth": 0.0}  # a gauge reads from one scrape; nothing waits between requests
    assert second["queue_depth"] == 0.0 and second["batch_size_mean"] == 4.0  # one batch per request here
    assert second["request_rate_qps"] > 0


def test_kserve_predict_histogram_as_busy_fraction_and_request_rate(
    kserve_server: SharedPeer, tmp_path: Path
) -> None:
    url = kserve_server.url
    src = source(url, "kserve-v2", tmp_path)
    try:
        send(
            url, "kserve-v2", KSERVE_MODEL_NAME, inputs=2, requests=1
        )  # the histogram's series exists after one
        assert scrape(src) == {}  # no gauge: rates need a second scrape
        send(url, "kserve-v2", KSERVE_MODEL_NAME, inputs=2, requests=3)
        second = scrape(src)
    finally:
        src.close()
    assert set(second) == {"busy_frac", "request_rate_qps"}, second
    assert 0 < second["busy_frac"] <= 1.5 and second["request_rate_qps"] > 0

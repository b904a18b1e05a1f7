"""Live figures read back from the parts the real writers flush; web-UI option helpers; the --help hook."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from embedperf.parts import PartsWriter
from embedperf.schema import REQUEST_SCHEMA, TELEMETRY_SCHEMA, RunFolder, StageRecord, empty_request_row
from loadgen.lifecycle.options import Suggestions, rejoin_overrides
from loadgen.recording.live import LATENCY_BUCKETS_MS, LiveRun, PartsTail, RunFollower
from loadgen.recording.live_export import LiveExporter
from tests.golden.builders import scenario_for_stages, write_run
from tests.unit.loadgen.fresh_interpreter import run_cases


def request_row(stage: int, latency_ms: float, ok: bool = True, **extra: object) -> dict[str, object]:
    row = empty_request_row()
    row.update(
        stage_index=stage, stage_label=f"u{stage}", target_users=stage + 1, endpoint="/v1/embeddings",
        t_sent_unix_s=100.0 + stage * 10, t_done_unix_s=100.0 + stage * 10 + latency_ms / 1000,
        latency_ms=latency_ms, ok=ok, status_code=200 if ok else 503, error="" if ok else "HTTP 503",
        srv_compute_ms=latency_ms / 2 if ok else None,
    )  # fmt: skip
    row.update(extra)
    return row


def test_tail_reads_only_what_each_flush_appended(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    writer = PartsWriter(folder.requests_parts, REQUEST_SCHEMA, "requests", flush_interval_s=3600)
    tail = PartsTail(folder.requests_parts)
    writer.write(request_row(0, 4.0))
    writer.flush()
    assert [r["latency_ms"] for r in tail.read_new()] == [4.0]
    assert list(tail.read_new()) == []  # nothing new
    writer.write(request_row(0, 7.0))
    writer.write(request_row(1, 9.0))
    writer.flush()
    assert [r["latency_ms"] for r in tail.read_new()] == [7.0, 9.0]
    writer.close()


def test_live_run_counts_steps_buckets_errors_and_server_means(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    writer = PartsWriter(folder.requests_parts, REQUEST_SCHEMA, "requests", flush_interval_s=3600)
    for latency_ms in (4.0, 20.0, 600.0):
        writer.write(request_row(0, latency_ms))
    writer.write(request_row(0, 30.0, ok=False))
    writer.write(request_row(0, 1.0, endpoint="validation:empty_must_fail"))  # a probe, not traffic
    writer.write(request_row(1, 8.0))
    writer.flush()
    live = LiveRun(folder).refresh()
    step0 = live.steps[0]
    assert (step0.requests, step0.ok, step0.errors) == (4, 3, 1)
    assert dict(step0.errors_by_kind) == {"http_503": 1}
    assert sum(step0.latency_bucket_counts) == 4 and step0.latency_sum_ms == 654.0
    assert step0.latency_bucket_counts[LATENCY_BUCKETS_MS.index(5)] == 1
    assert step0.latency_bucket_counts[LATENCY_BUCKETS_MS.index(1000)] == 1  # 600 ms
    assert step0.server_mean_ms() == {"compute": (2.0 + 10.0 + 300.0) / 3}
    assert live.current_step is live.steps[1] and live.steps[1].target_users == 2
    writer.close()


def test_the_live_tab_shows_p50_and_p99(tmp_path: Path) -> None:
    """From the bounded histogram: the bucket bound at or below which half (99%) of the latencies lie."""
    from types import SimpleNamespace

    from loadgen.recording.webui import WebUiFront

    folder = RunFolder(tmp_path)
    writer = PartsWriter(folder.requests_parts, REQUEST_SCHEMA, "requests", flush_interval_s=3600)
    for latency_ms in (4.0, 20.0, 30.0, 600.0):
        writer.write(request_row(0, latency_ms))
    writer.flush()
    front = WebUiFront(RunFollower(lambda: SimpleNamespace(folder=folder)))
    rows = {r.figure: r.value for r in front.rows()}
    assert rows["P50 / P99 ms"] == "<= 25 / <= 1000"
    step = front.live_json()["step"]
    assert (step["p50_ms_at_most"], step["p99_ms_at_most"]) == (25, 1000)
    writer.write(request_row(0, 60_000.0))
    writer.flush()
    assert {r.figure: r.value for r in front.rows()}["P50 / P99 ms"] == "<= 50 / > 10000"
    writer.close()


def test_device_figures_prefer_accelerators_else_host_and_service(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    telemetry = PartsWriter(folder.telemetry_parts, TELEMETRY_SCHEMA, "telemetry", flush_interval_s=3600)
    for ts, device, metric, value in [
        (1.0, "cpu", "cpu_util_pct", 40.0),
        (1.0, "proc:service", "busy_frac", 0.5),
        (2.0, "proc:service", "busy_frac", 0.75),
    ]:
        telemetry.write({"ts_unix_s": ts, "host": "h", "source": "psutil", "device": device, "metric": metric, "value": value})
    telemetry.flush()
    live = LiveRun(folder).refresh()
    assert {k: v.value for k, v in live.device_figures().items()} == {
        ("cpu", "cpu_util_pct"): 40.0,
        ("proc:service", "busy_frac"): 0.75,
    }
    telemetry.write({"ts_unix_s": 3.0, "host": "h", "source": "npu_smi", "device": "npu4.chip0", "metric": "power_w", "value": 90.0})
    telemetry.flush()
    assert {k: v.value for k, v in live.refresh().device_figures().items()} == {("npu4.chip0", "power_w"): 90.0}
    telemetry.close()


class _Run:
    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder


def test_exporter_serves_the_followed_run(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    writer = PartsWriter(folder.requests_parts, REQUEST_SCHEMA, "requests", flush_interval_s=3600)
    writer.write(request_row(0, 12.0))
    writer.flush()
    current: list[_Run | None] = [_Run(folder)]
    exporter = LiveExporter(RunFollower(lambda: current[0]), "127.0.0.1", 0)
    text = generate_latest(exporter.registry).decode()
    assert f'embedperf_requests_total{{outcome="ok",run_id="{folder.run_id}",stage="0",stage_label="u0"}} 1.0' in text
    assert 'embedperf_latency_ms_bucket{le="25",run_id=' in text
    current[0] = None  # the run ended: its figures stay exported
    assert "embedperf_requests_total{" in generate_latest(exporter.registry).decode()
    writer.close()


def test_set_values_split_at_commas_by_the_web_ui_are_rejoined() -> None:
    assert rejoin_overrides(["", "steps.duration_s=5", "payload.corpora=[en_short", "zh_short]", " "]) == [
        "steps.duration_s=5",
        "payload.corpora=[en_short,zh_short]",
    ]


def test_suggestions_list_choices_but_leave_validation_to_the_loader() -> None:
    choices = Suggestions(["ramp", "smoke"])
    assert list(choices) == ["ramp", "smoke"] and "scenarios/custom.yaml" in choices


WHOLE_HELP = """
import contextlib, io, json, sys
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from loadgen.wiring.plugin import HELP_OPTION, add_arguments
results = []
for args in json.loads(sys.argv[1]):
    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    add_arguments(parser, "ramp")
    printed, code = io.StringIO(), None
    with contextlib.redirect_stdout(printed):
        try:
            parsed = vars(parser.parse_args([a.replace("HELP", HELP_OPTION) for a in args]))
        except SystemExit as stopped:
            code, parsed = stopped.code, {}
    results.append([code, printed.getvalue(), parsed.get("scenario"), "embedperf_help" in parsed])
print(json.dumps(results))
"""


def test_the_help_option_prints_locusts_options_and_ours_then_exits() -> None:
    (code, printed, _, _), (no_exit, _, scenario, help_kept) = run_cases(
        WHOLE_HELP, [["HELP", "--scenario", "no-such-scenario"], []]  # HELP exits before any check
    )
    assert code == 0
    for option in ("--scenario-profile", "--set KEY=VALUE", "--runs-dir", "--headless", "--embedperf-help"):
        assert option in printed
    assert no_exit is None and scenario == "ramp" and not help_kept


def test_exporter_prices_each_step_only_when_the_scenario_has_prices(tmp_path: Path) -> None:
    for name, cost in (("priced", {"device_hour": {"npu": 2.0}, "host_hour": 0.4, "currency": "EUR"}), ("bare", None)):
        stage = StageRecord(index=0, label="u0", users=1, start_unix_s=100.0, end_unix_s=110.0)
        scenario = scenario_for_stages([stage], cost=cost) if cost else scenario_for_stages([stage])
        folder = write_run(tmp_path / name, [], [], [stage], scenario=scenario, service_info={"device": "npu:0"})
        writer = PartsWriter(folder.requests_parts, REQUEST_SCHEMA, "requests", flush_interval_s=3600)
        for k in range(11):  # 10 ok requests of 4 inputs over 1 s (sent 0.1 s apart, 10 ms each)
            writer.write(request_row(0, 10.0, n_inputs=4, t_sent_unix_s=100.0 + k / 10, t_done_unix_s=100.01 + k / 10))
        writer.flush()
        exporter = LiveExporter(RunFollower(lambda folder=folder: _Run(folder)), "127.0.0.1", 0)
        text = generate_latest(exporter.registry).decode()
        if cost is None:
            assert "embedperf_cost" not in text
            continue
        labels = f'currency="EUR",run_id="{folder.run_id}",stage="0",stage_label="u0"'
        assert f"embedperf_cost_per_hour{{{labels}}} 2.4" in text
        embeddings_per_s = 11 * 4 / 1.01
        expected = 2.4 / (embeddings_per_s * 3600.0) * 1e6
        line = next(x for x in text.splitlines() if x.startswith("embedperf_cost_per_1m_embeddings{"))
        assert abs(float(line.rsplit(" ", 1)[1]) - expected) < 1e-6 * expected
        writer.close()

"""Target protocols as a user meets them: real third-party servers (Infinity, KServe) and the TEI stub, given
only by their URL or with --protocol; rerank runs against the reference service and the stub; and a protocol
of the user's own, named from outside the project. Each run is `embedperf run` with short steps."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.compute as pc
import pytest
import uvicorn

from analysis.run.analyse import analyse_folder
from benchmarks.peer_launch import VLLM_STYLE_MODEL_NAMES
from embedperf.error_kinds import error_kind
from embedperf.schema import RunFolder, read_manifest, read_requests_table, read_telemetry_table
from loadgen.traffic.quality import write_reference_set
from reports.build import build_report
from tests.conftest import uvicorn_in_thread
from tests.fakes.tei_stub import TeiStub, TeiStubConfig
from tests.fakes.toy_protocol import TOY_PATH, serving_toy
from tests.peers.shared import SharedPeer

REPO_ROOT = Path(__file__).resolve().parents[2]
EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]
SHORT = ["--set", "steps.duration_s=2", "--set", "steps.warmup_s=0.5"]
RERANK_STEP = ["--set", "steps=[{label: u2, users: 2, duration_s: 5, warmup_s: 0.5}]"]
# long enough for the collectors (a process of their own, seconds to start) to scrape the target a few times
SAMPLED = ["--set", "steps.duration_s=5", "--set", "steps.warmup_s=0.5"]
TEI_DELAY_MS = 20.0  # whole milliseconds in TEI's headers: long enough that every phase reads above 0


def embedperf_run(
    *args: str, runs: Path, steps: list[str] = SHORT, timeout_s: float = 240
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`embedperf run ARGS` (short steps), its output, and the pre-flight line when it printed one."""
    proc = subprocess.run(
        [*EMBEDPERF, "run", *args, "--runs-dir", str(runs), *steps],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("target: ")]
    return proc, lines[0] if lines else ""


def folder_of(proc: subprocess.CompletedProcess[str]) -> RunFolder:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("run folder: ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    return RunFolder(Path(lines[-1].removeprefix("run folder: ").strip()))


def ok_rows(folder: RunFolder, columns: list[str]) -> list[dict[str, Any]]:
    """Every row, asserted successful (a failed one shows its error)."""
    rows = read_requests_table(folder, ["ok", "error", *columns]).to_pylist()
    assert rows, "no request rows"
    failed = [r["error"] for r in rows if not r["ok"]]
    assert not failed, failed[:5]
    return rows


@pytest.fixture(scope="module")
def tei_embedder() -> Iterator[str]:
    """The TEI stub serving an embedding model, each request taking TEI_DELAY_MS."""
    with serving(TeiStub(TeiStubConfig(delay_ms=TEI_DELAY_MS))) as url:
        yield url


@pytest.fixture(scope="module")
def tei_reranker() -> Iterator[str]:
    with serving(TeiStub(TeiStubConfig(model_type="reranker"))) as url:
        yield url


def serving(app: Any) -> Any:
    return _url(uvicorn_in_thread(uvicorn.Config(app, port=0, lifespan="off", log_level="warning")))


class _url:
    """uvicorn_in_thread's (host, port) as a base URL."""

    def __init__(self, served: Any) -> None:
        self.served = served

    def __enter__(self) -> str:
        host, port = self.served.__enter__()
        return f"http://{host}:{port}"

    def __exit__(self, *exc: object) -> None:
        self.served.__exit__(*exc)


# --- only the host ----------------------------------------------------------------------------------------
def test_only_the_host_drives_infinity(infinity_server: SharedPeer, tmp_path: Path) -> None:
    proc, line = embedperf_run("smoke", "--host", infinity_server.url, "--no-collectors", runs=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert line.startswith("target: infinity (infinity-style OpenAI) at /embeddings, model ")
    assert "(detected from GET /models;" in line
    folder = folder_of(proc)
    ok_rows(folder, [])
    target = read_manifest(folder).target
    assert (target.protocol, target.path) == ("infinity", "/embeddings") and target.model in line


def test_only_the_host_drives_a_vllm_style_server_under_a_model_name_it_was_not_told(
    infinity_vllm_style_server: SharedPeer, tmp_path: Path
) -> None:
    proc, line = embedperf_run(
        "smoke", "--host", infinity_vllm_style_server.url, "--no-collectors", runs=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = VLLM_STYLE_MODEL_NAMES[0]
    assert f'at /v1/embeddings, model "{served}" (detected from GET /v1/models;' in line
    folder = folder_of(proc)
    ok_rows(folder, [])
    assert read_manifest(folder).target.model == served


def test_a_model_the_vllm_style_server_does_not_serve_is_named_before_any_load(
    infinity_vllm_style_server: SharedPeer, tmp_path: Path
) -> None:
    proc, _ = embedperf_run(
        "smoke", "--host", infinity_vllm_style_server.url, "--model", "all-MiniLM-L6-v2", runs=tmp_path
    )
    assert proc.returncode == 2
    served = ", ".join(VLLM_STYLE_MODEL_NAMES)
    assert f"model all-MiniLM-L6-v2 is not served here; it serves: {served}" in proc.stderr
    assert not list(tmp_path.iterdir())  # nothing measured


# --- --protocol P: a complete run folder and report ---------------------------------------------------------
# the service telemetry each run must hold: Infinity's /metrics has HTTP counters only, none of ours; TEI's
# queue gauge is read from the first scrape; KServe's figures are rates of two scrapes under load, which a
# short run on a busy host may not get: tests/integration/collectors/test_protocol_metrics.py reads them
PROTOCOL_TARGETS = [
    ("infinity", "infinity_server", set()),
    ("kserve-v2", "kserve_server", None),
    ("tei", "tei_embedder", {"queue_depth"}),
]


@pytest.mark.parametrize(("protocol", "fixture", "service_metrics"), PROTOCOL_TARGETS)
def test_a_named_protocol_writes_a_complete_run_and_report(
    protocol: str,
    fixture: str,
    service_metrics: set[str] | None,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    server = request.getfixturevalue(fixture)
    url = server if isinstance(server, str) else server.url
    steps = SAMPLED if service_metrics else SHORT
    proc, line = embedperf_run("smoke", "--host", url, "--protocol", protocol, runs=tmp_path, steps=steps)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert line.startswith(f"target: {protocol} (") and "(as given" in line  # the model was looked up
    folder = folder_of(proc)
    manifest = read_manifest(folder)
    assert manifest.complete and manifest.target.protocol == protocol
    rows = ok_rows(folder, ["srv_queue_ms", "srv_tokenize_ms", "srv_compute_ms", "srv_total_ms"])
    report = build_report(folder)
    html = report.read_text(encoding="utf-8")
    assert report.is_file() and "smoke" in html
    summary = analyse_folder(folder, n_boot=50).summary
    assert summary.totals.n_ok == len(rows) and summary.totals.errors_by_kind == {}
    service = read_telemetry_table(folder, ["source", "metric"]).filter(
        pc.equal(pc.field("source"), "service")
    )
    seen = set(service.column("metric").to_pylist())
    if protocol == "tei":  # TEI's timing headers are the Server-Timing decomposition
        assert all(r["srv_total_ms"] >= r["srv_compute_ms"] > 0 for r in rows)
        assert all(r["srv_queue_ms"] is not None and r["srv_tokenize_ms"] is not None for r in rows)
        assert all(s.stats.server.compute_ms for s in summary.steps)  # the report's decomposition per step
    else:
        assert all(r["srv_total_ms"] is None for r in rows)
    if service_metrics:
        assert service_metrics <= seen, seen
    elif service_metrics is not None:
        assert not seen, seen


# --- quality probes: each protocol's answer read as that server shapes it ---------------------------------
PROBE_TEXTS = [f"passage {i}: how a capacity plan counts the devices a target load needs" for i in range(8)]


def test_quality_probes_read_a_kserve_v2_tensor_and_match_the_fp32_reference(
    kserve_server: SharedPeer, reference_service: str, tmp_path: Path
) -> None:
    # the reference vectors: the same model in fp32, from the reference service (OpenAI-shaped answers)
    answer = httpx.post(
        f"{reference_service}/v1/embeddings",
        json={"model": "all-MiniLM-L6-v2", "input": PROBE_TEXTS},
        timeout=60,
    ).json()
    vectors = np.array([item["embedding"] for item in answer["data"]])
    reference = write_reference_set(tmp_path / "ref.parquet", PROBE_TEXTS, vectors, "all-MiniLM-L6-v2")
    probes = f"payload.quality_probes={{fraction: 0.5, reference: {reference}, min_cosine: 0.999}}"
    proc, _ = embedperf_run(
        "smoke", "--host", kserve_server.url, "--protocol", "kserve-v2", "--set", probes, runs=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = ok_rows(folder_of(proc), ["probe_cosine"])
    cosines = [r["probe_cosine"] for r in rows if r["probe_cosine"] is not None]
    # KServe answers a flat FP32 tensor with its shape: every probe read, and the same model's vectors
    assert len(cosines) >= 5 and len(cosines) < len(rows), (len(cosines), len(rows))
    assert min(cosines) > 0.999, min(cosines)


# --- rerank -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fixture", [pytest.param("reference_service", marks=pytest.mark.solo), "tei_reranker"])
def test_a_rerank_run_checks_every_ranking_and_reports_documents_per_second(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue(fixture)
    # one 5 s step of two users, and solo for the reference service (make test runs it alone): three 2 s
    # steps of up to 16 users, beside other workers' tests, often ended with none answered in the window
    proc, line = embedperf_run("rerank", "--host", url, "--no-collectors", runs=tmp_path, steps=RERANK_STEP)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert " at /rerank, " in line
    folder = folder_of(proc)
    rows = ok_rows(folder, ["documents", "n_inputs"])
    assert all(4 <= r["documents"] <= 16 and r["n_inputs"] == r["documents"] + 1 for r in rows)
    summary = analyse_folder(folder, n_boot=50).summary
    (step,) = summary.steps
    stats = step.stats
    assert stats.label == "u2" and stats.n_ok
    # documents/s over requests/s: the documents of a request, 4 to 16
    assert stats.documents_per_s is not None and 4 <= stats.documents_per_s / stats.goodput_qps <= 16
    html = build_report(folder).read_text(encoding="utf-8")
    assert "Documents/s" in html


class BreaksAfter:
    """The TEI stub's reranker answering the first `healthy` /rerank requests well (the pre-flight checks of
    `embedperf run` and of its Locust) and every later one malformed (its `malformed_rerank` fault)."""

    def __init__(self, stub: TeiStub, healthy: int) -> None:
        self.stub, self.healthy, self.seen = stub, healthy, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/rerank":
            self.seen += 1
            if self.seen > self.healthy and self.stub.config.fault == "none":
                self.stub.config = self.stub.config.model_copy(update={"fault": "malformed_rerank"})
        await self.stub(scope, receive, send)


def test_a_malformed_rerank_answer_is_counted_as_invalid_answer(tmp_path: Path) -> None:
    app = BreaksAfter(TeiStub(TeiStubConfig(model_type="reranker")), healthy=2)
    with serving(app) as url:
        proc, _ = embedperf_run("rerank", "--host", url, "--no-collectors", runs=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]  # complete, over the error budget
    folder = folder_of(proc)
    rows = read_requests_table(folder, ["ok", "status_code", "error"]).to_pylist()
    assert rows and not any(r["ok"] for r in rows)
    assert {error_kind(r["status_code"], r["error"]) for r in rows} == {"invalid_answer"}
    assert all("not a permutation" in r["error"] for r in rows)
    summary = analyse_folder(folder, n_boot=50).summary
    assert set(summary.totals.errors_by_kind) == {"invalid_answer"}


# --- a protocol of the user's own ---------------------------------------------------------------------------
def test_a_protocol_from_outside_the_project_runs_end_to_end(tmp_path: Path) -> None:
    spec = "tests.fakes.toy_protocol:PROTOCOL"
    with serving_toy() as (url, handler):
        proc, line = embedperf_run(
            "smoke", "--host", url, "--protocol", spec, "--no-collectors", runs=tmp_path
        )
        served = handler.requests_seen
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert line.startswith(f"target: {spec} (toy JSON-lines embeddings) at {TOY_PATH}")
    folder = folder_of(proc)
    rows = ok_rows(folder, ["n_inputs"])
    assert served >= len(rows) + 2  # every row was a request to the toy server, after the two pre-flights
    assert read_manifest(folder).target.protocol == spec
    assert json.loads(folder.manifest.read_text())["target"]["path"] == TOY_PATH

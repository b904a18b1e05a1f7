"""The per-request path: the fast answer check agrees with full parsing, rows land in schema order."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from embedperf.error_kinds import error_kind
from embedperf.schema import (
    REQUEST_COLUMNS,
    REQUEST_ID_HEADER,
    SERVED_MODEL_HEADER,
    RequestRow,
    RunFolder,
    read_requests_table,
)
from loadgen.recording.recorder import Recorder, StageTimeline
from loadgen.traffic.context import RunContext, build_context
from loadgen.traffic.exchange import dropped_row, send_embeddings
from loadgen.traffic.headers import (
    TIMING_VALUE_COLUMNS,
    parse_server_timing,
    raw_timing_values,
    timing_values,
)
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.openai import check_embeddings, check_parsed
from loadgen.traffic.request_ids import request_ids
from scenarios.loader import load_scenario


def _ctx(expected_dim: int | None, sink: Any = None) -> RunContext:
    ctx = build_context(
        load_scenario("smoke", environ={}), "http://x", sink or (lambda row: None), "local", None
    )
    ctx.expected_dim, ctx.dim_source = expected_dim, "test"
    return ctx


def check_body(body: bytes, ctx: RunContext, n_inputs: int) -> tuple[str, int | None]:
    """The openai protocol's check of a float answer, byte scan first."""
    return check_embeddings(body, n_inputs, "float", ctx)


def _check_parsed(body: bytes, ctx: RunContext, n_inputs: int) -> tuple[str, int | None]:
    return check_parsed(body, n_inputs, "float", ctx)


def _answer(*dims: int, tokens: Any = 7, pretty: bool = False) -> bytes:
    doc = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": [0.25] * d} for i, d in enumerate(dims)],
        "model": "m",
        "usage": {"prompt_tokens": tokens, "total_tokens": 0},
    }
    return json.dumps(doc, indent=2 if pretty else None).encode()


ANSWERS = [
    (_answer(4, 4), 2),
    (_answer(4, 4, pretty=True), 2),
    (_answer(4), 2),  # wrong count
    (_answer(4, 4, 4), 2),
    (_answer(4, 8), 2),  # different sizes
    (_answer(8, 8), 2),  # wrong dimension
    (_answer(0), 1),
    (_answer(4, tokens=None), 1),
    (_answer(4, tokens=2.5), 1),
    (_answer(4)[:-5], 1),  # truncated
    (b"<html>busy</html>", 1),
    (b'{"data": "nope"}', 1),
    (b'{"data": [{"index": 0}]}', 1),
    (b'{"data": [{"embedding": [[1, 2], [3, 4]]}]}', 1),
    (b'{"data": [{"embedding": [1, 2, 3, 4]}], "usage": {"prompt_tokens": 3}}', 1),
    (b'{"data":[{"embedding":[1,2,3,4]}],"usage":{"prompt_tokens":12}}', 1),
]


@pytest.mark.parametrize(("body", "n_inputs"), ANSWERS)
def test_fast_check_agrees_with_full_parsing(body: bytes, n_inputs: int) -> None:
    assert check_body(body, _ctx(4), n_inputs) == _check_parsed(body, _ctx(4), n_inputs)


def test_fast_check_accepts_the_common_answer_and_reads_tokens() -> None:
    assert check_body(_answer(4, 4, tokens=11), _ctx(4), 2) == ("", 11)
    assert check_body(_answer(4, 4), _ctx(5), 2)[0].startswith("wrong dimension: 4, expected 5")


def test_timing_values_follow_the_row_tail_and_the_dict_parser() -> None:
    start = REQUEST_COLUMNS.index(TIMING_VALUE_COLUMNS[0])
    assert REQUEST_COLUMNS[start : start + len(TIMING_VALUE_COLUMNS)] == TIMING_VALUE_COLUMNS
    assert REQUEST_COLUMNS[start + len(TIMING_VALUE_COLUMNS) :] == (
        "probe_cosine",
        "request_id",
        "served_model",
        "side",
        "agreement_cosine",
        "documents",
    )
    header = "queue;dur=1.5, tokenize;dur=0.25, compute;dur=5, post;dur=0.5, total;dur=7.25"
    headers = {"Server-Timing": header, "X-Batch-Size": "8", "X-Batch-Tokens": " 120 "}
    values = timing_values(headers.get)
    assert values == [1.5, 0.25, 5.0, 0.5, 7.25, 8, 120]
    parsed = parse_server_timing(header)
    assert [parsed[c] for c in TIMING_VALUE_COLUMNS[:5]] == values[:5]
    assert timing_values({"Server-Timing": "total; dur = \"3\";desc=x, cache;desc=hit"}.get) == [
        None, None, None, None, 3.0, None, None,
    ]  # fmt: skip
    assert timing_values({}.get) == [None] * 7
    assert timing_values({"X-Batch-Size": "many"}.get) == [None] * 7


class _Response:
    """What the session's user agent (FastHttpSession.client.urlopen) returns for an answered request."""

    status_code = 200

    def __init__(self, content: bytes, headers: dict[str, str]) -> None:
        self.content = content
        self.headers = headers


class _Event:
    def __init__(self) -> None:
        self.fired: list[dict[str, Any]] = []

    def fire(self, **kwargs: Any) -> None:
        self.fired.append(kwargs)


class _Client:
    """The parts of Locust's FastHttpSession that send_embeddings uses."""

    base_url = "http://127.0.0.1:1"
    auth_header = None

    def __init__(self, response: _Response) -> None:
        self.response = response
        self.bodies: list[dict[str, Any]] = []
        self.sent_headers: list[dict[str, str]] = []
        self.request_event = _Event()
        self.client = self  # FastHttpSession.client: the user agent that sends

    def urlopen(self, url: str, method: str, payload: str, headers: dict[str, str]) -> _Response:
        assert method == "POST" and url == f"{self.base_url}/v1/embeddings"
        assert headers["Content-Type"] == "application/json"
        self.bodies.append(json.loads(payload))
        self.sent_headers.append(dict(headers))
        return self.response

    @property
    def failed(self) -> str:
        """The failure reported to Locust for the last request ('' when it counted as a success)."""
        exception = self.request_event.fired[-1]["exception"]
        return str(exception) if exception is not None else ""


def test_send_embeddings_row_is_in_schema_order(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run").create()
    timeline = StageTimeline()
    timeline.begin(0, "u8", 0.0, users=8)
    watched: list[list[Any]] = []
    recorder = Recorder(folder, timeline, watch=watched.append)
    headers = {"Server-Timing": "queue;dur=1, total;dur=2", "X-Batch-Size": "3", "X-Batch-Tokens": "40"}
    client = _Client(_Response(_answer(4, 4, tokens=9), headers))
    ctx = _ctx(4, recorder.write)
    row = send_embeddings(client, ctx, RequestPayload(["ab", "cde"], "/v1/embeddings"))  # type: ignore[arg-type]
    got = asdict(row)
    assert client.bodies[0]["input"] == ["ab", "cde"] and not client.failed
    assert got["run_id"] == "run" and got["worker"] == "local"
    assert (got["stage_index"], got["stage_label"], got["target_users"]) == (0, "u8", 8)
    assert got["t_intended_unix_s"] == got["t_sent_unix_s"] <= got["t_done_unix_s"]
    assert got["latency_ms"] == pytest.approx(got["latency_from_intended_ms"], abs=0.001)
    assert (got["status_code"], got["ok"], got["error"]) == (200, True, None)
    assert (got["n_inputs"], got["input_chars"], got["input_tokens"]) == (2, 5, 9)
    assert got["response_bytes"] == len(client.response.content)
    open_loop = send_embeddings(
        client,  # type: ignore[arg-type]
        ctx,
        RequestPayload(["x", "y"], "/v1/embeddings"),
        t_intended_unix_s=1.0,
        stage=(2, "r50", None, 50.0),
    )
    assert (open_loop.stage_index, open_loop.stage_label, open_loop.target_users, open_loop.target_rate) == (
        2,
        "r50",
        None,
        50.0,
    )
    assert recorder.close() == 2
    assert [values[REQUEST_COLUMNS.index("n_inputs")] for values in watched] == [2, 2]  # the adaptive-step watch
    table = read_requests_table(folder).to_pydict()
    assert table["input_chars"] == [5, 2] and table["batch_tokens"] == [40, 40]
    assert table["srv_queue_ms"] == [1.0, 1.0] and table["srv_total_ms"] == [2.0, 2.0]
    assert table["srv_compute_ms"] == [None, None] and table["batch_size"] == [3, 3]
    assert table["ok"] == [True, True] and table["error"] == [None, None]


def test_a_failed_check_is_recorded_with_its_reason() -> None:
    rows: list[RequestRow] = []
    client = _Client(_Response(_answer(4), {}))
    row = send_embeddings(client, _ctx(4, rows.append), RequestPayload(["a", "b"], "/v1/embeddings"))  # type: ignore[arg-type]
    got = asdict(row)
    assert got["ok"] is False and got["error"].startswith("wrong count: 1 embeddings for 2 inputs")
    assert client.failed == got["error"] and rows == [row]
    assert got["srv_total_ms"] is None and got["batch_size"] is None


class _RerankClient(_Client):
    def urlopen(self, url: str, method: str, payload: str, headers: dict[str, str]) -> _Response:
        assert method == "POST" and url == f"{self.base_url}/rerank"
        self.bodies.append(json.loads(payload))
        return self.response


def test_a_rerank_row_counts_its_documents_and_reads_teis_headers(tmp_path: Path) -> None:
    """A TEI rerank: the query and 3 documents sent, the ranking checked, the documents recorded, TEI's timing
    headers parsed into the decomposition columns and its token header into input_tokens."""
    folder = RunFolder(tmp_path / "run").create()
    timeline = StageTimeline()
    timeline.begin(0, "u1", 0.0, users=1)
    recorder = Recorder(folder, timeline)
    scenario = load_scenario(
        "smoke", overrides={"target.protocol": "tei", "payload.task": "rerank"}, environ={}
    )
    ctx = build_context(scenario, "http://x", recorder.write, "local", None)
    tei = {"x-queue-time": "3", "x-tokenization-time": "1", "x-inference-time": "7", "x-total-time": "12"}
    good = [{"index": 2, "score": 0.9}, {"index": 0, "score": 0.5}, {"index": 1, "score": 0.1}]
    client = _RerankClient(_Response(json.dumps(good).encode(), {**tei, "x-compute-tokens": "33"}))
    payload = RequestPayload(["d1", "doc2", "d3"], "/rerank", query="what")
    row = send_embeddings(client, ctx, payload)  # type: ignore[arg-type]
    got = asdict(row)
    assert client.bodies == [{"query": "what", "texts": ["d1", "doc2", "d3"]}] and not client.failed
    assert (got["documents"], got["n_inputs"], got["input_chars"], got["input_tokens"]) == (3, 4, 12, 33)
    client.response = _Response(json.dumps(good[:2] + [{"index": 2, "score": 0.0}]).encode(), tei)
    bad = asdict(send_embeddings(client, ctx, payload))  # type: ignore[arg-type]
    assert bad["ok"] is False and "not a permutation" in bad["error"] and client.failed == bad["error"]
    assert error_kind(bad["status_code"], bad["error"]) == "invalid_answer"
    assert recorder.close() == 2
    table = read_requests_table(folder).to_pydict()
    assert table["srv_queue_ms"] == [3.0, 3.0] and table["srv_tokenize_ms"] == [1.0, 1.0]
    assert table["srv_compute_ms"] == [7.0, 7.0] and table["srv_total_ms"] == [12.0, 12.0]
    assert table["srv_post_ms"] == [None, None] and table["documents"] == [3, 3]


TIMING_HEADERS = [
    "queue;dur=1.5, tokenize;dur=0.25, compute;dur=5, post;dur=0.5, total;dur=7.25",  # the service's layout
    "queue;dur=0.100, tokenize;dur=0.200, compute;dur=12.345, post;dur=0.050, total;dur=12.695",
    "queue;dur=, tokenize;dur=0.2, compute;dur=x, post;dur=0.1, total;dur=3",  # layout, odd values
    "total;dur=3, queue;dur=1",  # other order
    'queue;desc="wait";dur=2, total;dur="4"',  # parameters and quotes
    "queue;dur=1, tokenize;dur=2, compute;dur=3, post;dur=4, total;dur=5, cache;desc=hit",  # one more metric
    "cache;desc=hit",
    "",
]


@pytest.mark.parametrize("header", TIMING_HEADERS)
def test_timing_values_agree_with_the_general_parser_on_any_layout(header: str) -> None:
    parsed = parse_server_timing(header)
    values = timing_values({"Server-Timing": header}.get)
    assert values[:5] == [parsed.get(c) for c in TIMING_VALUE_COLUMNS[:5]]


def test_timing_values_join_a_header_sent_on_several_lines() -> None:
    headers: dict[str, Any] = {"Server-Timing": ["queue;dur=1", "total;dur=2"], "X-Batch-Size": "4"}
    values = timing_values(headers.get)  # geventhttpclient answers a list for a repeated header
    assert values == [1.0, None, None, None, 2.0, 4, None]


@pytest.mark.parametrize(
    ("body", "dim", "n_inputs"),
    [
        (b'{"data": [{"embedding": [ ]}], "usage": {"prompt_tokens": 1}}', 1, 1),  # a blank list is empty
        (b'{"data": [{"embedding": [0.5]}], "usage": {"prompt_tokens": 1}}', 1, 1),
        (b'{"embedding": [1, 2, 3, 4]}', 4, 1),  # no `data`
        (b'  {"data": [{"embedding": [1, 2, 3, 4]}]}\n', 4, 1),  # surrounding whitespace
        (b'{"usage": {"prompt_tokens": 5}, "data": [{"embedding": [1, 2, 3, 4]}]}', 4, 1),  # usage first
        (b'{"data": [{"embedding": [1, 2, 3, 4]}], "usage": {"prompt_tokens": 2.5}}', 4, 1),
    ],
)
def test_fast_check_agrees_with_full_parsing_at_other_dimensions(
    body: bytes, dim: int, n_inputs: int
) -> None:
    assert check_body(body, _ctx(dim), n_inputs) == _check_parsed(body, _ctx(dim), n_inputs)


def test_rows_are_tagged_with_the_stage_of_their_intended_start(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run").create()
    timeline = StageTimeline()
    timeline.begin(0, "u1", 100.0, users=1)
    timeline.begin(1, "r50", 110.0, rate=50.0)
    recorder = Recorder(folder, timeline)
    intended = REQUEST_COLUMNS.index("t_intended_unix_s")
    stage = REQUEST_COLUMNS.index("stage_index")
    rows = []
    for t in (99.0, 100.0, 109.9, 110.0, 500.0, None):
        row: list[Any] = [None] * len(REQUEST_COLUMNS)
        row[intended] = t
        recorder.write_values(row)
        rows.append(row[stage : stage + 4])
    assert rows == [[0, "u1", 1, None]] * 3 + [[1, "r50", None, 50.0]] * 3  # None: the current stage
    assert recorder.close() == 6
    table = read_requests_table(folder).to_pydict()
    assert sorted(table["stage_index"]) == [0, 0, 0, 1, 1, 1] and set(table["run_id"]) == {"run"}


def _recorded_timing(tmp_path: Path, rows: list[list[Any]]) -> list[list[Any]]:
    """TIMING_VALUE_COLUMNS per row as the recorder writes them (one batch)."""
    recorder = Recorder(RunFolder(tmp_path / "run").create(), StageTimeline())
    for i, row in enumerate(rows):
        values: list[Any] = [None] * len(REQUEST_COLUMNS)
        values[REQUEST_COLUMNS.index("t_intended_unix_s")] = float(i)
        start = REQUEST_COLUMNS.index(TIMING_VALUE_COLUMNS[0])
        values[start : start + len(row)] = row
        recorder.write_values(values)
    recorder.close()
    table = read_requests_table(recorder.folder).sort_by("t_intended_unix_s").to_pydict()
    return [list(v) for v in zip(*(table[c] for c in TIMING_VALUE_COLUMNS), strict=True)]


SERVICE_HEADERS = {
    "Server-Timing": "queue;dur=0.100, tokenize;dur=0.200, compute;dur=12.345, post;dur=0.050, total;dur=12.695",
    "X-Batch-Size": "8",
    "X-Batch-Tokens": " 120 ",
}


@pytest.mark.parametrize(
    "headers",
    [
        [SERVICE_HEADERS] * 3,  # the service's layout in every row
        [SERVICE_HEADERS, {}, {"X-Batch-Size": "4"}],  # headers missing
        [SERVICE_HEADERS, *({"Server-Timing": h} for h in TIMING_HEADERS)],  # other layouts
        [SERVICE_HEADERS, {"Server-Timing": ["queue;dur=1", "total;dur=2"], "X-Batch-Size": "+4"}],
        [SERVICE_HEADERS, {"X-Batch-Size": "many", "X-Batch-Tokens": "1_000"}],
    ],
)
def test_raw_headers_are_written_as_the_parsed_values(tmp_path: Path, headers: list[dict[str, Any]]) -> None:
    rows = [raw_timing_values(h.get) for h in headers]
    assert _recorded_timing(tmp_path, rows) == [timing_values(h.get) for h in headers]


def test_rows_with_parsed_values_and_raw_rows_share_a_batch(tmp_path: Path) -> None:
    parsed = [1.0, None, None, None, 2.0, 3, None]
    rows = [parsed, raw_timing_values(SERVICE_HEADERS.get), [None] * 7]
    assert _recorded_timing(tmp_path, rows) == [parsed, timing_values(SERVICE_HEADERS.get), [None] * 7]


def test_every_request_carries_its_own_id_and_the_row_keeps_it_with_the_served_model(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run").create()
    timeline = StageTimeline()
    timeline.begin(0, "u1", 0.0, users=1)
    recorder = Recorder(folder, timeline)
    ctx = _ctx(4, recorder.write)
    main = _Client(_Response(_answer(4), {SERVED_MODEL_HEADER: "minilm"}))
    fallback = _Client(_Response(_answer(4), {SERVED_MODEL_HEADER: "minilm-int8"}))
    silent = _Client(_Response(_answer(4), {}))  # a target that names no model
    repeated = _Client(_Response(_answer(4), {SERVED_MODEL_HEADER: ["a", "b"]}))  # sent on two lines
    rows = [
        send_embeddings(client, ctx, RequestPayload(["ab"], "/v1/embeddings"))  # type: ignore[arg-type]
        for client in (main, fallback, main, silent, repeated)
    ]
    sent = [h[REQUEST_ID_HEADER] for c in (main, fallback, silent, repeated) for h in c.sent_headers]
    ids = [r.request_id for r in rows]
    assert sorted(sent) == sorted(ids) and len(set(ids)) == len(ids) == 5
    assert all(0 < len(i) <= 24 and i.isascii() for i in ids)
    assert REQUEST_ID_HEADER not in _request_headers_of(main)  # the cached headers stay shared and ID-free
    assert recorder.close() == 5
    table = read_requests_table(folder).to_pydict()
    assert table["request_id"] == ids
    assert table["served_model"] == ["minilm", "minilm-int8", "minilm", None, "a, b"]


def _request_headers_of(client: _Client) -> dict[str, str]:
    return getattr(client, "_embedperf_headers")  # noqa: B009 - the per-client cache exchange keeps


def test_request_ids_are_unique_across_generator_processes() -> None:
    """Each process (each RunContext) draws its own prefix: two workers' IDs never meet in one run."""
    a, b = _ctx(4), _ctx(4)
    first = [next(a.request_ids) for _ in range(1000)]
    second = [next(b.request_ids) for _ in range(1000)]
    assert len(set(first) | set(second)) == 2000
    assert {i.rsplit("-", 1)[0] for i in first} != {i.rsplit("-", 1)[0] for i in second}
    fixed = request_ids("run7")
    assert (next(fixed), next(fixed)) == ("run7-1", "run7-2")


def test_a_dropped_request_has_no_id() -> None:
    rows: list[RequestRow] = []
    row = dropped_row(_ctx(4, rows.append), RequestPayload(["a"], "/v1/embeddings"), 1.0, "dropped: x", None)
    got = asdict(row)
    assert got["request_id"] is None and got["served_model"] is None and rows == [row]


FIRST_FLUSH = """
import sys
from pathlib import Path
from embedperf.schema import RequestRow, RunFolder
from loadgen.recording.recorder import Recorder, StageTimeline

folder = RunFolder(Path(sys.argv[1])).create()
timeline = StageTimeline()
timeline.begin(0, "r60", 0.0, rate=60.0)
recorder = Recorder(folder, timeline)  # before the load: one-time work belongs here
recorder.write(RequestRow(t_intended_unix_s=1.0, t_sent_unix_s=1.0, t_done_unix_s=1.02, latency_ms=20.0, ok=True,
                          status_code=200, error=None, endpoint="/v1/embeddings", n_inputs=1,
                          srv_total_ms=float("nan")))
before = set(sys.modules)
recorder.flush()  # what the flusher does 2 s into the first step, in the load's event loop
print(sorted({name.split(".")[0] for name in set(sys.modules) - before}))
recorder.close()
"""


def test_the_first_flush_imports_nothing(tmp_path: Path) -> None:
    # In Locust's gevent loop an import cannot yield: a lazy import in the first flush (pyarrow importing
    # pandas took 0.2 s idle, 0.5 s on a busy host) stalled every request in flight 2 s into the first step,
    # which then showed a P99 of ~500 ms against a 20 ms target.
    done = subprocess.run(
        [sys.executable, "-c", FIRST_FLUSH, str(tmp_path / "run")],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[3],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"imported during the first flush: {done.stdout}"

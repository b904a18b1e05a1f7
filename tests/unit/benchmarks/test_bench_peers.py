"""`make peers` (benchmarks/bench_peers.py) with its servers and wrk replaced: which servers run in which
order, what the table says, and that a peer which cannot start is named with its reason while the others
still run. vLLM's command line and the environment shim of `make peers-setup-vllm` are checked here too;
the real servers are not started (vLLM needs its own multi-GB environment, which make test never builds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import bench_peers, peer_launch
from benchmarks.bench_peers import WrkResult, table
from benchmarks.peer_launch import vllm_command
from embedperf.errors import TargetError
from tests.peers.vllm_dist_alias import alias_metadata

CONNECTIONS = [1, 10, 50, 100]


def result(qps: float, p99_ms: float) -> WrkResult:
    return WrkResult(qps=qps, p50_ms=p99_ms / 2, p99_ms=p99_ms, non_2xx=0, socket_errors=0, wrk_cpu_cores=0.1)


def test_table_has_a_row_per_server_and_the_reason_a_peer_is_missing() -> None:
    results = {
        **{("reference", c): [result(100.0, 10.0), result(120.0, 20.0)] for c in CONNECTIONS},
        **{("infinity", c): [result(50.0, 20.0), result(60.0, 40.0)] for c in CONNECTIONS},
    }
    text = table(results, CONNECTIONS, 2, {"vllm": "vllm exited with 1 before it answered\nlog tail"})
    rows = [line for line in text.splitlines() if line.lstrip()[:1].isdigit()]
    assert len(rows) == 2 * len(CONNECTIONS)  # reference and Infinity at each count, no vLLM row
    infinity_at_100 = next(r for r in rows if r.split("|")[0].strip() == "100" and "infinity" in r)
    qps_ratio, p99_ratio = infinity_at_100.split("|")[3].split()
    assert (qps_ratio, p99_ratio) == ("2.00", "0.50")  # the median of the rounds' reference/peer ratios
    assert "vllm: not measured: vllm exited with 1 before it answered" in text
    assert "log tail" not in text  # the first line of the reason only; the whole of it was printed


def fake_run(monkeypatch: pytest.MonkeyPatch, failing: set[str]) -> list[tuple[int, str]]:
    """main() with every server measured by a stand-in; `failing` servers raise TargetError at start."""
    calls: list[tuple[int, str]] = []

    def measure(name: str, args: argparse.Namespace, tmp: Path, round_index: int) -> dict[int, WrkResult]:
        calls.append((round_index, name))
        if name in failing:
            raise TargetError(f"{name} did not answer its health path within 300 s")
        return {c: result(100.0 if name == "reference" else 80.0, 10.0) for c in args.connections}

    monkeypatch.setattr(bench_peers, "measure", measure)
    monkeypatch.setattr(bench_peers, "peer_version", lambda name: "1.0")
    monkeypatch.setattr(bench_peers, "wrk_found", lambda: True)
    return calls


def test_a_peer_that_cannot_start_is_named_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls = fake_run(monkeypatch, failing={"vllm"})
    out = tmp_path / "peers.txt"
    assert bench_peers.main(["--rounds", "3", "--out", str(out)]) == 0
    assert calls == [
        (0, "reference"), (0, "infinity"), (0, "vllm"),
        (1, "infinity"), (1, "reference"),  # reversed, and vLLM is not tried again
        (2, "reference"), (2, "infinity"),
    ]  # fmt: skip
    text = out.read_text()
    assert "vllm: not measured: vllm did not answer its health path within 300 s" in text
    for c in CONNECTIONS:  # 1, 10, 50 and 100 connections by default
        assert any(line.split("|")[:2] == [f"{c:>5} ", " infinity  "] for line in text.splitlines())


def test_without_the_reference_service_there_is_no_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_run(monkeypatch, failing={"reference"})
    with pytest.raises(SystemExit, match="the reference service failed"):
        bench_peers.main(["--rounds", "1", "--out", str(tmp_path / "peers.txt")])
    assert not (tmp_path / "peers.txt").exists()


def test_vllm_serves_the_folder_as_a_pooling_model_in_fp32(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(peer_launch, "PEERS_DIR", tmp_path)
    with pytest.raises(TargetError, match="make peers-setup-vllm"):
        vllm_command(tmp_path / "model")
    (tmp_path / "vllm" / "bin").mkdir(parents=True)
    (tmp_path / "vllm" / "bin" / "vllm").write_text("")
    command = vllm_command(tmp_path / "model", port=8123)
    argv = command.argv
    assert argv[:3] == [str(tmp_path / "vllm" / "bin" / "vllm"), "serve", str(tmp_path / "model")]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert (
        flags["--runner"] == "pooling" and flags["--dtype"] == "float32" and flags["--max-model-len"] == "256"
    )
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8123"
    assert command.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert (command.health_path, command.api_prefix, command.url) == (
        "/health",
        "/v1",
        "http://127.0.0.1:8123",
    )


def test_the_vllm_alias_keeps_the_metadata_under_the_name_vllm_and_a_cpu_version() -> None:
    metadata = "Metadata-Version: 2.4\nName: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: torch==2.13.0+cpu\n"
    assert alias_metadata(metadata, "0.32.0+cpu") == (
        "Metadata-Version: 2.4\nName: vllm\nVersion: 0.32.0+cpu\nRequires-Dist: torch==2.13.0+cpu\n"
    )

"""Remote service hosts: `embedperf agent` serves its host's samples, `embedperf run --agent` pulls them
on its own clock. Two agents on loopback stand for two service hosts: one with the 8-NPU fake
npu-smi, one with a skewed clock that is killed mid-run. The run itself has no npu-smi."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from collectors.agent_pull import spool_path
from embedperf.schema import RunFolder, read_manifest, read_telemetry_table
from loadgen.processes.stub_target import running_stub
from tests.agent_process import agent_process
from tests.e2e.test_real_deployment_e2e import (
    assert_serving_figures,
    embedperf,
    fake_env,
    summary_of,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SKEW_S = 2.25
READY_TIMEOUT_S = 60.0
STUB_DELAY_MS = 20  # ~50 answers/s per user: the agents are what is measured, not the load


def sampling(body: dict[str, object]) -> bool:
    """Every source the agent runs has produced samples."""
    sources = body.get("sources")
    assert isinstance(sources, list)
    running = [s for s in sources if s["status"] not in ("skipped", "failed")]
    return bool(running) and all(s["samples"] > 0 for s in running)


@contextmanager
def agent(*args: str, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`embedperf agent --port 0 ...`; yields its URL and the process once every source it runs has samples."""
    with agent_process(*args, env=env) as (url, proc):
        deadline = time.monotonic() + READY_TIMEOUT_S
        token = args[args.index("--token") + 1] if "--token" in args else None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        while not sampling(httpx.get(f"{url}/samples", params={"since": 0}, headers=headers).json()):
            assert time.monotonic() < deadline, "agent produced no samples"
            time.sleep(0.2)
        yield url, proc


def no_npu_env() -> dict[str, str]:
    """The load generator's host: no npu-smi anywhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_NPU", "EMBEDPERF_NPU_SMI"))}
    env["EMBEDPERF_NPU_SMI"] = "/nonexistent/npu-smi"
    return env


def test_agent_serves_prometheus_and_json_and_guards_the_network(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    with agent("--sources", "npu_smi,host", "--host-label", "svc-a", env=env) as (url, _):
        samples = httpx.get(f"{url}/samples", params={"since": 0}).json()
        assert samples["host"] == "svc-a"
        devices = {row[2] for row in samples["samples"] if row[1] == "npu_smi"}
        assert devices == {f"npu{i}.chip0" for i in range(8)}
        later = httpx.get(f"{url}/samples", params={"since": max(r[0] for r in samples["samples"])}).json()
        assert all(r[0] > max(s[0] for s in samples["samples"]) for r in later["samples"])
        metrics = httpx.get(f"{url}/metrics").text
        assert re.search(
            r'embedperf_device_util_pct\{device="npu3.chip0",host="svc-a",source="npu_smi"\} 66', metrics
        )
        assert 'embedperf_cpu_util_pct{device="cpu",host="svc-a",source="psutil"}' in metrics
    refused = embedperf("agent", "--port", "0", "--bind", "0.0.0.0", env=env)
    assert refused.returncode == 2 and "--token" in refused.stderr
    with agent("--sources", "host", "--token", "s3cret", env=env) as (url, _):
        assert httpx.get(f"{url}/samples").status_code == 401
        ok = httpx.get(f"{url}/time", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["now_unix_s"] > 0


def pulled_into_the_run(runs_dir: Path, agent_url: str) -> bool:
    """Whether the run under runs_dir has pulled samples the agent took after the collectors started.

    The first pull, made as the collectors start, holds the second before their start only, which the
    run leaves out of its window; every later pull (every 2 s) asks for samples after it. So the agent
    must live until the run's spool of it holds two complete pulls.
    """
    for folder in runs_dir.iterdir() if runs_dir.is_dir() else []:
        spool = spool_path(RunFolder(folder), agent_url)
        if not spool.is_file():
            continue
        pulls = [line for line in spool.read_text(encoding="utf-8").splitlines() if line.endswith("]")]
        if len(pulls) >= 2:
            return True
    return False


class TwoAgentRun(NamedTuple):
    folder: RunFolder
    url_a: str  # svc-a: the 8-NPU fake npu-smi, 3 and 5 serving
    url_b: str  # svc-b: host figures only, its clock SKEW_S ahead; killed mid-run


@pytest.fixture(scope="module")
def two_agent_run(tmp_path_factory: pytest.TempPathFactory) -> TwoAgentRun:
    """`embedperf run --agent A --agent B` from a generator without npu-smi; B is killed once the run
    holds some of its samples. The run must exit 0 (a lost agent is a gap, not a failed run) and
    `embedperf report` 0."""
    tmp_path = tmp_path_factory.mktemp("agents")
    runs_dir = tmp_path / "runs"
    with (
        running_stub("--delay-ms", str(STUB_DELAY_MS)) as target,
        agent("--sources", "npu_smi", "--host-label", "svc-a", env=fake_env(tmp_path)) as (url_a, _),
        agent(
            "--sources", "host", "--host-label", "svc-b", "--clock-skew-s", str(SKEW_S), env=fake_env(tmp_path)
        ) as (url_b, proc_b),
    ):  # fmt: skip
        cmd = ["run", "smoke", "--host", target, "--runs-dir", str(runs_dir), "--set", "steps.duration_s=5",
               "--devices", "3,5", "--agent", url_a, "--agent", url_b]  # fmt: skip
        log = tmp_path / "run.log"
        with open(log, "wb") as out:
            run = subprocess.Popen(
                [sys.executable, "-m", "embedperf.cli", *cmd],
                cwd=REPO_ROOT, env=no_npu_env(), stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 120.0
        while not pulled_into_the_run(runs_dir, url_b) and time.monotonic() < deadline:
            assert run.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)  # svc-b's first seconds reach the run folder (pulled every 2 s), then it dies
        proc_b.kill()
        proc_b.wait(timeout=10)
        assert run.wait(timeout=180) == 0, log.read_text(errors="replace")[-3000:]
    [folder_path] = [p for p in runs_dir.iterdir() if (p / "manifest.json").is_file()]
    report = embedperf("report", str(folder_path), env=no_npu_env())
    assert report.returncode == 0, report.stderr
    return TwoAgentRun(RunFolder(folder_path), url_a, url_b)


def test_run_pulls_the_serving_figures_from_an_agent(two_agent_run: TwoAgentRun) -> None:
    """The generator has no npu-smi; the agent on the 'service host' has the 8-NPU fake."""
    folder, url = two_agent_run.folder, two_agent_run.url_a
    manifest = read_manifest(folder)
    statuses = {c.name: c.status for c in manifest.collectors}
    assert statuses["npu_smi"] == "skipped" and statuses[f"agent {url}"] == "ok"
    record = next(r for r in manifest.agents if r.url == url)
    assert record.host == "svc-a" and record.status == "ok" and record.offset_s is not None
    assert abs(record.offset_s) < 0.05 and record.missing_s == []
    telemetry = read_telemetry_table(folder).to_pandas()
    assert set(telemetry[telemetry["source"] == "npu_smi"]["host"]) == {"svc-a"}
    assert_serving_figures(folder)


def test_two_agents_one_skewed_one_killed_mid_run(two_agent_run: TwoAgentRun) -> None:
    open_folder, url_a, url_b = two_agent_run
    manifest = read_manifest(open_folder)
    assert manifest.complete
    records = {r.url: r for r in manifest.agents}
    a, b = records[url_a], records[url_b]
    assert (a.host, b.host) == ("svc-a", "svc-b")
    assert a.status == "ok" and a.offset_s is not None and abs(a.offset_s) < 0.05
    assert b.status == "partial" and b.missing_s, "the seconds after the kill are missing"
    assert b.offset_s is not None and b.offset_s == pytest.approx(SKEW_S, abs=0.05)
    assert b.offset_uncertainty_s is not None and b.offset_uncertainty_s < 0.05
    telemetry = read_telemetry_table(open_folder).to_pandas()
    b_rows = telemetry[telemetry["host"] == "svc-b"]
    assert len(b_rows), "svc-b's samples before the kill are kept"
    # svc-b ticks on whole seconds of its own clock; on ours they fall SKEW_S earlier (fraction .75).
    fractions = (b_rows["ts_unix_s"] % 1.0).to_numpy()
    assert abs(fractions - (1.0 - SKEW_S % 1.0)).max() < 0.05
    assert manifest.start_unix_s is not None and b_rows["ts_unix_s"].min() >= manifest.start_unix_s - 1.0
    assert not {int(t // 1) for t in b_rows["ts_unix_s"]} & set(b.missing_s)
    summary = summary_of(open_folder)
    codes = {f["code"] for f in summary["findings"]}
    assert {"agent_clock_offset", "agent_gap"} <= codes
    assert summary["devices_in_run"] == 2
    html = open_folder.report.read_text(encoding="utf-8")
    assert "svc-b" in html and "sent no samples for" in html
    assert json.loads(open_folder.agents_status.read_text())  # the raw records stay in the run folder

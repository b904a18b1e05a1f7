"""`embedperf run --agent URL` against an agent that refuses the run's token: the pre-flight check stops the
run with exit 2 and a line naming the refused token, before any load (no run folder, no request sent); the
right token lets the same run through."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from collectors.agent_token import TOKEN_ENV
from loadgen.processes.stub_target import running_stub
from tests.integration.collectors.test_agent_token import SECRET, running_agent

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300  # a guard against a hang, not a performance bound


def embedperf_run(stub: str, agent: str, runs: Path, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, TOKEN_ENV: token}
    args = ["run", "smoke", "--host", stub, "--agent", agent, "--runs-dir", str(runs), "--set", "steps.duration_s=2",
            "--set", "steps.warmup_s=0"]  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "embedperf.cli", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )  # fmt: skip


def requests_seen(stub: str) -> int:
    return int(httpx.get(f"{stub}/_count", timeout=5).json()["requests"])


def test_an_agent_refusing_the_token_stops_the_run_in_the_preflight_check(tmp_path: Path) -> None:
    agent_env = {**{k: v for k, v in os.environ.items() if k != TOKEN_ENV}, TOKEN_ENV: SECRET}
    with running_agent(env=agent_env) as (agent, _proc), running_stub() as stub:
        runs = tmp_path / "runs"
        refused = embedperf_run(stub, agent, runs, token="not-the-token")
        output = refused.stdout + refused.stderr
        assert refused.returncode == 2, output
        assert f"agent {agent} refused the token (401)" in output and TOKEN_ENV in output
        assert "never answered" not in output
        assert not runs.is_dir() or not [p for p in runs.iterdir() if p.is_dir()]  # nothing measured
        before = requests_seen(stub)  # the pre-flight's own embeddings requests only
        accepted = embedperf_run(stub, agent, runs, token=SECRET)
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        assert requests_seen(stub) > before + 1  # the same run with the right token does load the target

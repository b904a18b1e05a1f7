"""Least privilege for `embedperf agent`: the token comes from the environment or a file (never the
process's command line), an empty one is refused on the network like a missing one, and the pulling side
reads it the same way and names a refused token as such."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from collectors.agent_pull import AgentSource, check_agent
from collectors.agent_token import TOKEN_ENV
from collectors.config import CollectorConfig
from embedperf.schema import RunFolder
from tests.agent_process import agent_process
from tests.conftest import stop_process

REPO_ROOT = Path(__file__).resolve().parents[3]
SECRET = "s3cret-agent-token"
READY_TIMEOUT_S = 60.0  # a guard against a hang, not a performance bound


def agent_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    return {**env, **extra}


def embedperf_agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embedperf.cli", "agent", "--port", "0", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@contextmanager
def running_agent(*args: str, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`embedperf agent --sources host --port 0 ARGS`; yields its URL once it has samples, and the process
    (its stderr kept apart: a test reads the warnings once it is stopped)."""
    with agent_process("--sources", "host", *args, env=env, stderr=subprocess.PIPE) as (url, proc):
        deadline = time.monotonic() + READY_TIMEOUT_S
        headers = {"Authorization": f"Bearer {SECRET}"}
        while not httpx.get(f"{url}/samples", params={"since": 0}, headers=headers).json()["samples"]:
            assert time.monotonic() < deadline, "agent produced no samples"
            time.sleep(0.2)
        yield url, proc


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--token", ""], {}),
        ([], {TOKEN_ENV: ""}),
        (["--token-file", "EMPTY"], {}),
        ([], {}),
    ],
    ids=["empty --token", "empty env", "empty file", "no token"],
)
def test_an_empty_token_is_refused_on_the_network_like_a_missing_one(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n", encoding="utf-8")
    args = [str(empty) if a == "EMPTY" else a for a in args]
    done = embedperf_agent("--bind", "0.0.0.0", "--sources", "host", *args, env=agent_env(**env))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"set {TOKEN_ENV}=TOKEN or pass --token-file PATH" in done.stderr
    assert "serving" not in done.stdout


@pytest.mark.parametrize("where", ["env", "file"])
def test_the_token_from_the_environment_or_a_file_guards_every_endpoint_and_stays_off_the_command_line(
    tmp_path: Path, where: str
) -> None:
    token_file = tmp_path / "agent-token"
    token_file.write_text(SECRET + "\n", encoding="utf-8")
    args = ["--token-file", str(token_file)] if where == "file" else []
    env = agent_env(**({TOKEN_ENV: SECRET} if where == "env" else {}))
    with running_agent(*args, env=env) as (url, proc):
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert SECRET.encode() not in cmdline  # what `ps` shows every user of the host
        for path in ("/metrics", "/samples", "/time"):
            assert httpx.get(f"{url}{path}").status_code == 401
            assert httpx.get(f"{url}{path}", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 200
        assert httpx.get(f"{url}/metrics", headers={"Authorization": f"bearer {SECRET}"}).status_code == 200
        assert httpx.get(f"{url}/metrics", headers={"Authorization": f"Basic {SECRET}"}).status_code == 401
        assert check_agent(url, SECRET) is None
        refused = check_agent(url, "wrong")
        assert refused is not None and "refused the token (401)" in refused and TOKEN_ENV in refused


def test_a_token_on_the_command_line_still_works_but_warns() -> None:
    with running_agent("--token", SECRET, env=agent_env()) as (url, proc):
        assert httpx.get(f"{url}/time", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 200
        stop_process(proc)  # type: ignore[arg-type]
        assert proc.stderr is not None
        assert "--token is visible to every user of this host" in proc.stderr.read()


@pytest.mark.parametrize(("token", "pulled"), [(SECRET, True), ("wrong", False)])
def test_the_pull_reads_the_token_file_and_names_a_refused_token(
    tmp_path: Path, token: str, pulled: bool
) -> None:
    token_file = tmp_path / "run-token"
    token_file.write_text(token, encoding="utf-8")
    with running_agent(env=agent_env(**{TOKEN_ENV: SECRET})) as (url, _):
        config = CollectorConfig.model_validate(
            {"out_dir": tmp_path / "run", "agents": (url,), "agent_token_file": token_file}
        )
        config.out_dir.mkdir()
        source = AgentSource(config, url)
        start = time.time()
        source.start()
        try:
            rows = list(source.finish(start - 5.0, time.time()))
        finally:
            source.close()
    status = source.status.snapshot()
    if pulled:
        assert rows and source.refused is None
    else:
        assert rows == [] and source.refused is not None
        assert [e["kind"] for e in status.events] == ["error"], status.events  # named once, not as an outage
        assert "refused the token (401)" in status.events[0]["message"]
        (record,) = json.loads(RunFolder(config.out_dir).agents_status.read_text(encoding="utf-8"))
        assert record["status"] == "failed" and "refused the token (401)" in record["reason"]

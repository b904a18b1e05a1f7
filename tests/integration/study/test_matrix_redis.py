"""The matrix's shared-cache configuration: a real private redis-server per run, handed to the service, then gone.

The service and the load run are stand-ins that record what they were given (the real ones are covered by
the matrix end-to-end test); Redis itself is real.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import study.matrix.run
from study.matrix.run import MatrixRecord, run_matrix
from study.matrix.spec import MatrixSpec


def _answers_ping(url: str) -> bool:
    host, port = url.removeprefix("redis://").split("/")[0].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def test_redis_configuration_gets_its_own_redis_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert shutil.which("redis-server"), "redis-server missing: `make system-deps` installs it"
    seen: list[tuple[list[str], bool]] = []

    class FakeService:
        def __init__(self, args: list[str], **_: Any) -> None:
            self.args = args
            self.url = "http://127.0.0.1:1"

        def __enter__(self) -> FakeService:
            url = self.args[self.args.index("--cache") + 1] if "--cache" in self.args else ""
            seen.append((self.args, bool(url) and _answers_ping(url)))  # Redis is up while the service runs
            return self

        def __exit__(self, *_: Any) -> None:
            return None

    def fake_run(scenario: str, url: str, runs_dir: Path, label: str, **_: Any) -> SimpleNamespace:
        root = runs_dir / label
        root.mkdir(parents=True)
        return SimpleNamespace(root=root)

    monkeypatch.setattr(study.matrix.run, "ServiceProcess", FakeService)
    monkeypatch.setattr(study.matrix.run, "run_scenario", fake_run)
    spec = MatrixSpec.model_validate(
        {
            "scenario": "smoke",
            "configurations": [{"name": "baseline"}, {"name": "redis-cache", "redis": True}],
        }
    )
    folder = run_matrix(spec, tmp_path / "runs", check_precision=False, log=lambda _: None)
    record = MatrixRecord.read(folder)
    assert [(r.config, r.ok) for r in record.runs] == [("baseline", True), ("redis-cache", True)]
    (baseline_args, _), (cache_args, redis_was_up) = seen
    assert "--cache" not in baseline_args
    assert redis_was_up
    url = cache_args[cache_args.index("--cache") + 1]
    assert record.runs[1].service_args == cache_args  # matrix.json names the cache the run used
    assert not _answers_ping(url)  # stopped with its run


def test_a_missing_redis_server_fails_that_configuration_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(study.matrix.run, "run_scenario", lambda *a, **k: pytest.fail("must not run"))
    spec = MatrixSpec.model_validate(
        {"scenario": "smoke", "configurations": [{"name": "redis-cache", "redis": True}, {"name": "other"}]}
    )
    monkeypatch.setattr(study.matrix.run, "ServiceProcess", lambda *a, **k: pytest.fail("must not start"))
    folder = run_matrix(spec.select(["redis-cache"]), tmp_path / "runs", check_precision=False, log=print)
    run = MatrixRecord.read(folder).runs[0]
    assert not run.ok and "redis-server not found on PATH" in run.error and "apt-get install" in run.error

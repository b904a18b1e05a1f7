"""The agent token comes from a file or the environment, an empty one counts as none, and the run side
takes the file through the same device options every front end shares."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from collectors import agent
from collectors.agent_token import TOKEN_ENV, bearer_headers, resolve_token
from collectors.cli import config_from_args
from collectors.options import DeviceOptions, add_device_options
from embedperf.errors import ConfigError


def test_a_token_file_wins_over_the_environment_and_loses_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("s3cret\n", encoding="utf-8")
    assert resolve_token(path, {TOKEN_ENV: "from-env"}) == "s3cret"
    assert resolve_token(None, {TOKEN_ENV: "from-env"}) == "from-env"
    assert resolve_token(None, {}) is None
    assert bearer_headers("s3cret") == {"Authorization": "Bearer s3cret"} and bearer_headers(None) == {}


@pytest.mark.parametrize("text", ["", "\n", "   \t\n"])
def test_an_empty_token_counts_as_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "token"
    path.write_text(text, encoding="utf-8")
    assert resolve_token(path, {TOKEN_ENV: "ignored: the file was given"}) is None
    assert resolve_token(None, {TOKEN_ENV: text}) is None


def test_an_unreadable_token_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"cannot read the agent token file .*missing.*{TOKEN_ENV}"):
        resolve_token(tmp_path / "missing", {})


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--token", ""], {}),
        (["--token", "  "], {}),
        ([], {TOKEN_ENV: ""}),
        ([], {}),
        (["--token-file", "EMPTY"], {TOKEN_ENV: "not used: the file was given"}),
    ],
)
def test_binding_the_network_without_a_real_token_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str]
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = [str(empty) if a == "EMPTY" else a for a in argv]
    with pytest.raises(ConfigError, match=f"without authentication.*{TOKEN_ENV}.*--token-file"):
        agent.main(["--bind", "0.0.0.0", "--port", "0", *argv])


def test_a_token_on_the_command_line_is_taken_but_not_with_a_file_as_well(tmp_path: Path) -> None:
    parser = agent.build_parser()
    assert agent.agent_token(parser.parse_args(["--token", "t0k"])) == "t0k"
    path = tmp_path / "token"
    path.write_text("t0k", encoding="utf-8")
    with pytest.raises(ConfigError, match="give the token once"):
        agent.agent_token(parser.parse_args(["--token", "t0k", "--token-file", str(path)]))


def test_the_run_passes_the_token_file_to_the_collectors(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_device_options(parser)
    opts = DeviceOptions.from_namespace(
        parser.parse_args(["--agent", "http://svc:9187", "--agent-token-file", "/etc/embedperf/agent-token"])
    )
    assert opts.collector_args() == ["--agent-token-file", "/etc/embedperf/agent-token"]
    assert DeviceOptions.from_namespace(parser.parse_args(opts.command_args())) == opts
    config = config_from_args(["--out", str(tmp_path), "--agent", "http://svc:9187", *opts.collector_args()])
    assert config.agent_token_file == Path("/etc/embedperf/agent-token")

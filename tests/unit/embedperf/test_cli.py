"""The `embedperf` front door: help lists every subcommand; errors are one line with exit code 2."""

from __future__ import annotations

import pytest

from embedperf import cli
from embedperf.errors import RunFolderError


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.SUBCOMMANDS:
        assert f"  {name}" in out


def test_unknown_command_lists_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["reprot"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'reprot'" in err and "report" in err


def test_embedperf_errors_become_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(argv: list[str]) -> int:
        raise RunFolderError("runs/x has no manifest.json")

    monkeypatch.setattr(cli, "_load", lambda name: boom)
    assert cli.main(["report", "runs/x"]) == 2
    assert capsys.readouterr().err.strip() == "embedperf report: error: runs/x has no manifest.json"


def test_every_subcommand_module_exposes_main() -> None:
    for name in cli.SUBCOMMANDS:
        assert callable(cli._load(name)), name

"""Every command spells, scales and explains a shared option the way embedperf/options.py's table does,
and README's table of shared options is that table."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from embedperf.cli import SUBCOMMANDS
from embedperf.options import SHARED_OPTIONS, readme_rows

REPO = Path(__file__).resolve().parents[3]
# any spelling of a shared concept: a command adding one outside the table is a second vocabulary
CONCEPTS = re.compile(r"^--(error-budget|headroom|slo-p99|target-qps|lang|runs-dir)")


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def command_parser(name: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser `embedperf NAME` builds, caught as it parses (nothing after that runs)."""

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    main = importlib.import_module(SUBCOMMANDS[name][0]).main
    with pytest.raises(_Captured) as caught:
        main([])
    return caught.value.parser


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_every_shared_option_comes_from_the_table(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = command_parser(name, monkeypatch)
    current = {opt.flag: opt for opt in SHARED_OPTIONS.values()}
    retired = {r.flag: opt for opt in SHARED_OPTIONS.values() for r in opt.retired}
    for action in parser._actions:
        for flag in (f for f in action.option_strings if CONCEPTS.match(f)):
            if flag in retired:
                assert action.help == argparse.SUPPRESS and action.dest == retired[flag].dest, (name, flag)
                continue
            assert flag in current, f"{name}: {flag} is not in embedperf/options.py's table"
            opt = current[flag]
            assert action.dest == opt.dest and (action.help or "").startswith(opt.help.replace("%", "%%"))
            assert action.metavar == opt.metavar and action.type is opt.type, (name, flag)
    for opt in SHARED_OPTIONS.values():  # an option in the table comes with its retired spellings
        if opt.flag in parser._option_string_actions:
            assert all(r.flag in parser._option_string_actions for r in opt.retired), (name, opt.flag)


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_help_prints_percent_signs_once(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    main = importlib.import_module(SUBCOMMANDS[name][0]).main
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "%%" not in capsys.readouterr().out


def test_units_agree_between_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same number means the same thing: 25 is 25% headroom in capacity and verify alike."""
    capacity = command_parser("capacity", monkeypatch)
    verify = command_parser("verify", monkeypatch)
    monkeypatch.undo()
    a = capacity.parse_args(["--headroom-pct", "25", "--error-budget-pct", "0.1"])
    b = verify.parse_args(["--host", "http://h:1", "--headroom-pct", "25", "--error-budget-pct", "0.1"])
    assert (a.headroom_pct, a.error_budget_pct) == (b.headroom_pct, b.error_budget_pct) == (25.0, 0.1)


def test_retired_spellings_still_work_in_the_new_unit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    capacity = command_parser("capacity", monkeypatch)
    monkeypatch.undo()
    args = capacity.parse_args(["--headroom", "0.25", "--error-budget", "0.1"])
    assert (args.headroom_pct, args.error_budget_pct) == pytest.approx((25.0, 10.0))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "--headroom (fraction) is deprecated; use --headroom-pct 25" in err[0]
    with pytest.raises(SystemExit):
        capacity.parse_args(["--headroom-pct", "100"])  # a percentage below 100, not a fraction


def test_readme_table_is_the_option_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for row in readme_rows():
        assert row in readme, f"README's shared-option table lacks or differs from: {row}"

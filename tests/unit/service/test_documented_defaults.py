"""README's table of service defaults, `embedperf serve --help` and the settings (which /info shows) agree."""

from __future__ import annotations

import re

from service.cli import build_parser
from service.settings import ServiceSettings
from tests.conftest import REPO_ROOT

ROW = re.compile(r"^\| `--([a-z0-9-]+)` \| ([^|]+) \|", re.M)
UNITS = {"KiB": 1024, "MiB": 1024 * 1024}


def documented_defaults() -> dict[str, str]:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("### Under abuse and overload", 1)[1].split("\n- ", 1)[0]
    return {flag.replace("-", "_"): text.strip() for flag, text in ROW.findall(section)}


def value_of(text: str) -> object:
    if text == "auto":
        return None
    number, _, unit = text.replace(",", "").partition(" ")
    return float(number) * UNITS.get(unit, 1)


def test_the_readme_table_states_the_settings_defaults() -> None:
    table = documented_defaults()
    assert {"deadline_ms", "admit_wait_share", "max_header_bytes", "http_workers", "graphs"} <= set(table)
    fields = ServiceSettings.model_fields
    for name, text in table.items():
        default = fields[name].default
        if isinstance(default, str):  # a word: the README shows it as it is
            assert text == default, name
        elif default is None:
            assert text == "auto", name
        else:
            assert value_of(text) == float(default), (name, text, default)


def test_help_shows_the_same_defaults() -> None:
    helps = {action.dest: action.help or "" for action in build_parser()._actions}
    for name in documented_defaults():
        default = ServiceSettings.model_fields[name].default
        shown = "unset" if default is None else default
        assert f"(default: {shown})" in helps[name], name


def test_info_config_is_the_settings_themselves() -> None:
    config = ServiceSettings().public_config()
    for name in documented_defaults():
        assert config[name] == ServiceSettings.model_fields[name].default, name

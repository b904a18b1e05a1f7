"""The options Locust and `embedperf run` share parse alike: --api-key, --step-duration-s, --warmup-s
(a --set of the same key wins), --protocol and --model, and an unexpected answer from the target is excerpted
in one line.

Locust's side runs in a subprocess: importing Locust monkey-patches the process it runs in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from loadgen.cli import run as run_cli
from loadgen.lifecycle.options import shorthand_overrides
from loadgen.lifecycle.preflight import BODY_EXCERPT_CHARS, answer_excerpt
from scenarios.loader import load_scenario
from tests.conftest import python_json

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED = ["--api-key", "k-123", "--step-duration-s", "4", "--warmup-s", "1", "--set", "steps.1.warmup_s=2"]
TARGET = ["--protocol", "tei", "--model", "1.5"]  # a model id that YAML would read as a number
# Locust's own parser with embedperf's options on it, as `locust -f locustfiles/ramp.py` builds it; then
# the scenario those options resolve to and the environment variable the key was exported to.
LOCUST_PARSE = """
import json, os, sys
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment
from loadgen.wiring.plugin import add_arguments, resolve

parser = get_empty_argument_parser(add_help=False)
setup_parser_arguments(parser)
add_arguments(parser, "ramp")
options = parser.parse_args(["-f", "locustfiles/ramp.py", "--scenario", "smoke", *sys.argv[1:]])
scenario, _ = resolve(Environment(user_classes=[], parsed_options=options))
print(json.dumps({
    "api_key": options.api_key,
    "steps": [[s.duration_s, s.warmup_s] for s in scenario.steps],
    "exported": os.environ.get(scenario.target.api_key_env),
    "target": [scenario.target.protocol, scenario.target.model],
    "set_field": parser.args_included_in_web_ui["scenario_set"].help,
}))
"""


def locust_parse(*args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBEDPERF_")}
    result: dict[str, Any] = python_json("-c", LOCUST_PARSE, *args, timeout_s=60, env=env)
    return result


@pytest.mark.slow  # a Python process that imports Locust
def test_locust_parses_api_key_and_the_step_shorthands_and_exports_the_key() -> None:
    got = locust_parse(*SHARED, *TARGET, "--set", "target.api_key_env=MY_TARGET_KEY")
    assert got["api_key"] == "k-123"
    assert got["target"] == ["tei", "1.5"]
    assert got["steps"] == [[4.0, 1.0], [4.0, 2.0]]  # a --set of one step wins over --warmup-s
    assert got["exported"] == "k-123"  # where every request (pre-flight included) reads it
    # the web UI labels the field "scenario_set (help)" on one line: short, and it says commas separate
    assert "comma-separated" in got["set_field"] and len(got["set_field"]) <= 80


@pytest.mark.slow  # a Python process that imports Locust
def test_locust_without_api_key_leaves_the_environment_variable_alone() -> None:
    got = locust_parse("--step-duration-s", "4")
    assert got["api_key"] is None and got["exported"] is None
    assert got["steps"] == [[4.0, 1.0], [4.0, 1.0]]  # smoke's own warm-up
    assert got["target"] == ["openai", "all-MiniLM-L6-v2"]  # nothing checked (no --headless): the defaults


def test_embedperf_run_parses_the_same_options() -> None:
    args = run_cli.parse_args(["--scenario", "smoke", "--scenario-profile", "quick", *SHARED, *TARGET])
    assert (args.scenario, args.profile, args.api_key) == ("smoke", "quick", "k-123")
    assert (args.step_duration_s, args.warmup_s) == (4.0, 1.0)
    scenario = load_scenario("smoke", overrides=shorthand_overrides({}, args), environ={})
    assert (scenario.target.protocol, scenario.target.model) == ("tei", "1.5")
    assert run_cli.parse_args(["smoke"]).scenario == "smoke"
    with pytest.raises(SystemExit) as exit_info:
        run_cli.parse_args(["smoke", "--scenario", "ramp"])
    assert exit_info.value.code == 2


def test_an_html_page_is_its_content_type_and_title() -> None:
    page = b"<html>\n<head>\n  <title>\n 502 Bad\n Gateway</title></head>\n<body>" + b"<p>x</p>\n" * 50
    assert answer_excerpt(page, "text/html; charset=utf-8") == "text/html, page title '502 Bad Gateway'"


def test_other_answers_are_cut_to_one_short_line() -> None:
    long_text = b"line one\n\n   line two\t" + b"word " * 100
    excerpt = answer_excerpt(long_text, "text/plain")
    assert "\n" not in excerpt and excerpt.startswith("text/plain: line one line two word")
    assert len(excerpt) == len("text/plain: ") + BODY_EXCERPT_CHARS + 1 and excerpt.endswith("…")
    assert answer_excerpt(b"", "") == "no content type, empty body"
    assert answer_excerpt(b'{"error": "bad"}', "application/json") == 'application/json: {"error": "bad"}'


def test_a_dataset_relative_to_the_users_directory_reaches_locust_absolute(tmp_path: Path, monkeypatch) -> None:
    """`embedperf run` started elsewhere: Locust runs in the repository, so relative paths go absolute."""
    from loadgen.cli.runner import locust_command
    from scenarios.loader import parse_overrides

    (tmp_path / "texts.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cmd = locust_command("smoke", "http://127.0.0.1:1", Path("runs"), overrides={"payload.dataset": "{path: texts.jsonl, field: text}"})
    assert cmd[cmd.index("--runs-dir") + 1] == str(tmp_path / "runs")
    sets = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--set"]
    monkeypatch.chdir(REPO_ROOT)  # where the Locust child starts
    scenario = load_scenario("smoke", overrides=parse_overrides(sets), environ={})
    assert scenario.payload.dataset is not None and scenario.payload.dataset.path == str(tmp_path / "texts.jsonl")

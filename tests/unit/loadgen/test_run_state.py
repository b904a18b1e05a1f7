"""A run's state lives on Locust's Environment: one per Environment, found by users and listeners through
it, one run session at a time; installing embedperf twice registers each listener once.

Locust's side runs in a subprocess: importing Locust monkey-patches the process it runs in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import python_json

INSTALL_TWICE = """
import json
from locust import events, log
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
from locust.env import Environment
from loadgen.lifecycle.run_state import ATTRIBUTE, RunState
from loadgen.wiring.plugin import install

install("ramp")
install("ramp")
install("openloop")
parser = get_empty_argument_parser(add_help=False)
setup_parser_arguments(parser)
events.init_command_line_parser.fire(parser=parser)  # a second --scenario would be an argparse conflict
finalised = []

class Counting(RunState):
    def finalise(self, reason):
        finalised.append(reason)

environment = Environment(events=events)
setattr(environment, ATTRIBUTE, Counting(environment))
events.test_stop.fire(environment=environment)
print(json.dumps({
    "scenario_default": parser.parse_args(["-f", "locustfiles/ramp.py"]).scenario,
    "listener_failed": log.unhandled_greenlet_exception,
    "test_stop_finalised": finalised,
}))
"""

PER_ENVIRONMENT = """
import json, sys
from pathlib import Path
from locust.env import Environment
from loadgen.lifecycle.run_state import attach, state_of
from loadgen.lifecycle.session import RunOptions
from loadgen.traffic.context import RunContext
from loadgen.wiring.users import EmbeddingUser
from scenarios.loader import load_scenario

out = {}
scenario = load_scenario("smoke")
a, b = Environment(user_classes=[EmbeddingUser]), Environment(user_classes=[EmbeddingUser])
try:
    state_of(a)
except RuntimeError as exc:
    out["without_install"] = str(exc)
try:
    attach(a).current_context()
except RuntimeError as exc:
    out["before_test_start"] = str(exc)
out["attach_keeps_one"] = attach(a) is attach(a) is state_of(a) and attach(a) is not attach(b)
for env, host in ((a, "http://127.0.0.1:1"), (b, "http://127.0.0.1:2")):
    attach(env).context = RunContext(scenario=scenario, host=host, sink=lambda row: None)
users = [EmbeddingUser(a), EmbeddingUser(a), EmbeddingUser(a), EmbeddingUser(b)]
out["user_hosts"] = [u.host for u in users]
out["next_seed"] = [next(state_of(a).user_seq), next(state_of(b).user_seq)]

env = Environment(user_classes=[EmbeddingUser], host="http://127.0.0.1:9")  # nothing answers /info there
state = attach(env)
out["active_before_bind"] = state.active() is None
state.bind(scenario, RunOptions(runs_dir=Path(sys.argv[1]), collectors=False))
first = state.active()
out["first"] = [state.active() is first, state.current_session() is first, state.context is first.ctx,
                state.context is not None]
state.finalise("test stopped")
out["after_finalise"] = [state.current_session() is None, state.session is first, state.context is None,
                         first.finalised]
second = state.active()
out["second"] = [second is not first, second.folder.root != first.folder.root, state.context is second.ctx]
state.finalise("test stopped")
print(json.dumps(out))
"""


def _run(script: str, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = python_json("-c", script, *args)
    return result


@pytest.mark.slow  # a Python process that imports Locust
def test_install_twice_registers_each_listener_once() -> None:
    got = _run(INSTALL_TWICE)
    assert got["listener_failed"] is False  # no argparse conflict from a second set of options
    assert got["scenario_default"] == "ramp"  # the first locustfile's default
    assert got["test_stop_finalised"] == ["test stopped"]  # once, not once per install


@pytest.mark.slow  # a Python process that imports Locust
def test_each_environment_has_its_own_state_and_one_run_at_a_time(tmp_path: Path) -> None:
    got = _run(PER_ENVIRONMENT, str(tmp_path))
    assert "install(" in got["without_install"]  # the error says what to do
    assert "not started" in got["before_test_start"]
    assert got["attach_keeps_one"] is True
    assert got["user_hosts"] == ["http://127.0.0.1:1"] * 3 + ["http://127.0.0.1:2"]  # each its own run's
    assert got["next_seed"] == [3, 1]  # payload seeds counted per Environment
    assert got["active_before_bind"] is True
    assert got["first"] == [True, True, True, True]
    assert got["after_finalise"] == [True, True, True, True]
    assert got["second"] == [True, True, True]  # the web UI's next run: a new session and folder
    assert len(list(tmp_path.iterdir())) == 2

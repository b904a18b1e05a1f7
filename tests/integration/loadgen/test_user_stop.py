"""A closed-loop user stopped between two requests stops there: Locust kills a waiting user's greenlet, which
gevent delivers a callback round later, and the user must not have sent (and lost) a request by then."""

from __future__ import annotations

import pytest

from tests.conftest import python_json

# 100 users with no think time against a stub that answers in 1 ms, stopped 90 at a time as a shape's next
# stage does, then all at the run's end; rounds wait for rows, not for time.
STOPS = """
from gevent import monkey; monkey.patch_all()
import json, gevent
from locust.env import Environment
from loadgen.lifecycle.run_state import attach
from loadgen.traffic.context import RunContext
from loadgen.wiring.users import EmbeddingUser
from loadgen.processes.stub_target import running_stub
from scenarios.loader import load_scenario

def wait_for_rows(rows, n):
    for _ in range(3000):
        if len(rows) >= n:
            return
        gevent.sleep(0.01)
    raise SystemExit(f"only {len(rows)} rows of {n}")

rows, users_left = [], []
with running_stub("--delay-ms", "1") as url:
    env = Environment(user_classes=[EmbeddingUser], host=url)
    attach(env).context = RunContext(scenario=load_scenario("ramp"), host=url, sink=rows.append)
    env.stop_timeout = 10.0
    runner = env.create_local_runner()
    for _ in range(4):
        runner.start(100, spawn_rate=100)
        wait_for_rows(rows, len(rows) + 1000)
        runner.stop_users({"EmbeddingUser": 90})
        users_left.append(runner.user_count)
        wait_for_rows(rows, len(rows) + 200)
        runner.stop()
print(json.dumps({"rows": len(rows), "errors": sorted({r.error for r in rows if not r.ok}),
                  "users_left": users_left}))
"""


@pytest.mark.slow  # a Python process that imports Locust and runs a stub server
def test_users_stopped_between_requests_lose_none() -> None:
    got = python_json("-c", STOPS, timeout_s=300)
    assert got["users_left"] == [10, 10, 10, 10]
    assert got["rows"] >= 4 * 1200
    assert got["errors"] == []  # no "cut off: the run stopped 0.0 s into the request"

"""Locust users of a canary run: the scenario's load, each request sent to the baseline or the candidate.

Each user holds one HTTP client per side (the baseline's is Locust's own `client`, built for --host) and its
own seeded side draws; loadgen.traffic.canary_split decides where each request goes and sends agreement
samples to both sides."""

from __future__ import annotations

import gevent
from locust import constant, task
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from embedperf.canary_record import Side
from embedperf.schema import RequestRow
from loadgen.traffic.canary_split import CanaryTraffic, SideDraw
from loadgen.traffic.context import RunContext, Stage
from loadgen.traffic.cookies import install_lean_cookie_jar
from loadgen.traffic.payloads import RequestPayload
from loadgen.wiring.canary import traffic_of
from loadgen.wiring.users import EmbeddingClient, OpenLoopUser, let_a_stop_land

SESSION_SETTINGS = (  # FastHttpUser attributes its client is built with, under the same names
    "network_timeout", "connection_timeout", "max_redirects", "max_retries", "insecure", "concurrency",
    "client_pool", "ssl_context_factory", "proxy_host", "proxy_port",
)  # fmt: skip


class _CanaryClient(EmbeddingClient):
    abstract = True

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.traffic: CanaryTraffic = traffic_of(environment)
        self.draw = SideDraw(self.traffic.canary.seed, next(self.traffic.user_seq))
        candidate = FastHttpSession(  # the settings FastHttpUser gives its own client
            base_url=self.traffic.contexts["candidate"].host, request_event=self.environment.events.request,
            user=self, headers=self.default_headers,
            **{name: getattr(self, name) for name in SESSION_SETTINGS},
        )
        install_lean_cookie_jar(candidate)
        self.clients: dict[Side, FastHttpSession] = {"baseline": self.client, "candidate": candidate}


class CanaryUser(_CanaryClient):
    """Closed loop: send, wait for the answer, send again; each request's side drawn with the stage's weight."""

    wait_time = constant(0)

    @task
    def embed(self) -> None:
        let_a_stop_land()
        row = self.traffic.send(self.clients, self.draw, self.payloads.next())
        delay_s = self.backoff.after(row)
        if delay_s:
            gevent.sleep(delay_s)


class CanaryOpenLoopUser(_CanaryClient, OpenLoopUser):
    """Open loop: the scenario's arrival schedule (loadgen.shaping.openloop), each arrival split by its stage."""

    open_loop = True  # loadgen.wiring.plugin.check_locustfile: this file runs open-loop scenarios

    def _send(
        self, _client: FastHttpSession, _ctx: RunContext, payload: RequestPayload, t_intended: float,
        stage: Stage,
    ) -> RequestRow:
        return self.traffic.send(self.clients, self.draw, payload, t_intended, stage)

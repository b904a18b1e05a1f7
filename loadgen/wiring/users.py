"""Locust users: closed-loop embedding clients and the open-loop dispatcher."""

from __future__ import annotations

import gevent
from locust import constant, task
from locust.contrib.fasthttp import FastHttpSession, FastHttpUser
from locust.env import Environment

from embedperf.schema import RequestRow
from loadgen.lifecycle.run_state import RunState, state_of
from loadgen.shaping.openloop import run_schedule
from loadgen.shaping.search import run_search
from loadgen.traffic import context
from loadgen.traffic.backoff import Backoff
from loadgen.traffic.cookies import install_lean_cookie_jar
from loadgen.traffic.exchange import send_embeddings
from loadgen.traffic.payloads import PayloadSampler, RequestPayload


def _count_backoff(state: RunState, ctx: context.RunContext) -> None:
    """Per stage index (-1 where this process does not see the stages, e.g. a distributed worker)."""
    run = state.current_session()
    stages = run.timeline.stages if run is not None else []
    index = stages[-1].index if stages else -1
    ctx.connection_backoffs[index] = ctx.connection_backoffs.get(index, 0) + 1


def let_a_stop_land() -> None:
    """Locust stops a waiting user by killing its greenlet, and gevent delivers the kill one callback round
    later: with no think time the user has woken by then and sent its next request, which the kill would cut
    off 0 s in. One more yield before sending lets such a stop land before the request instead."""
    gevent.sleep(0)


class EmbeddingClient(FastHttpUser):
    abstract = True
    host = "http://127.0.0.1:8086"  # replaced by --host or the scenario's target.base_url

    def __init__(self, environment: Environment) -> None:
        self.run_state = state_of(environment)  # the run's state lives on Locust's Environment
        self.ctx = self.run_state.current_context()
        target = self.ctx.scenario.target
        self.host = self.ctx.host
        self.network_timeout = target.timeout_s
        self.connection_timeout = min(target.timeout_s, 10.0)
        self._configure()
        super().__init__(environment)
        install_lean_cookie_jar(self.client)
        self.backoff = Backoff()
        self.payloads = PayloadSampler(  # service_info: payload.tokens uses the target's tokenizer when local
            self.ctx.scenario.payload, target.path, seed_offset=next(self.run_state.user_seq),
            service_info=self.ctx.service_info,
        )

    def _configure(self) -> None:
        """Subclasses adjust connection settings before the client is built."""


class EmbeddingUser(EmbeddingClient):
    """Closed loop: send, wait for the answer, send again (no think time)."""

    wait_time = constant(0)

    @task
    def embed(self) -> None:
        let_a_stop_land()
        row = send_embeddings(self.client, self.ctx, self.payloads.next())
        delay_s = self.backoff.after(row)
        if delay_s:
            if row.status_code is None:  # no answer at all: counted for the outage analysis
                _count_backoff(self.run_state, self.ctx)
            gevent.sleep(delay_s)


class OpenLoopUser(EmbeddingClient):
    """One dispatcher starting requests at scheduled instants: the scenario's steps or a search's probes."""

    wait_time = constant(0)

    def _configure(self) -> None:
        self.concurrency = self.ctx.scenario.open_loop.max_in_flight

    def _send(
        self, client: FastHttpSession, ctx: context.RunContext, payload: RequestPayload, t_intended: float,
        stage: context.Stage,
    ) -> RequestRow:
        """One scheduled request; a canary's users split them between its sides."""
        return send_embeddings(client, ctx, payload, t_intended, stage)

    @task
    def dispatch(self) -> None:
        if self.ctx.scenario.search.enabled:
            run_search(self.client, self.ctx, self.payloads, self.environment)
        else:
            run_schedule(self.client, self.ctx, self.payloads, self.environment, send=self._send)
        while True:  # the shape stops this user after the drain period
            gevent.sleep(1.0)

"""Locust users: closed-loop embedding clients and the open-loop dispatcher."""

from __future__ import annotations

import itertools

import gevent
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser
from locust.env import Environment

from loadgen import context
from loadgen.exchange import send_embeddings
from loadgen.openloop import run_schedule
from loadgen.payloads import PayloadSampler

_user_seq = itertools.count()


class _EmbeddingClient(FastHttpUser):
    abstract = True
    host = "http://127.0.0.1:8086"  # replaced by --host or the scenario's target.base_url

    def __init__(self, environment: Environment) -> None:
        self.ctx = context.current()
        target = self.ctx.scenario.target
        self.host = self.ctx.host
        self.network_timeout = target.timeout_s
        self.connection_timeout = min(target.timeout_s, 10.0)
        self._configure()
        super().__init__(environment)
        self.payloads = PayloadSampler(self.ctx.scenario.payload, target.path, seed_offset=next(_user_seq))

    def _configure(self) -> None:
        """Subclasses adjust connection settings before the client is built."""


class EmbeddingUser(_EmbeddingClient):
    """Closed loop: send, wait for the answer, send again (no think time)."""

    wait_time = constant(0)

    @task
    def embed(self) -> None:
        send_embeddings(self.client, self.ctx, self.payloads.next())


class OpenLoopUser(_EmbeddingClient):
    """One dispatcher that starts requests at scheduled instants (see loadgen.openloop)."""

    wait_time = constant(0)

    def _configure(self) -> None:
        self.concurrency = self.ctx.scenario.open_loop.max_in_flight

    @task
    def dispatch(self) -> None:
        run_schedule(self.client, self.ctx, self.payloads, self.environment)
        while True:  # the shape stops this user after the drain period
            gevent.sleep(1.0)

"""One load, two targets: each request's side drawn by the current stage's weight, a sample also sent across.

The side is drawn per request from a seeded generator, so whatever the host does falls on both sides alike. An
agreement sample (canary.agreement_fraction) sends its texts to the drawn side, then to the other, and keeps
the two answers' lowest cosine on the second row (`agreement_cosine`); every request is an ordinary row of its
side (`side`)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from embedperf.canary_record import Side
from embedperf.schema import RequestRow
from loadgen.traffic.context import RowSink, RunContext, Stage, info_dimension
from loadgen.traffic.exchange import send_embeddings
from loadgen.traffic.payloads import RequestPayload
from scenarios.canary_models import Canary

if TYPE_CHECKING:  # importing locust monkey-patches the process; only its users need that
    from locust.contrib.fasthttp import FastHttpSession

SEED_STRIDE = 7_919  # distinct, well-separated seeds per user


class SideDraw:
    """One user's seeded draws: which side a request goes to, and whether it is an agreement sample."""

    def __init__(self, seed: int, user_index: int) -> None:
        self._rng = random.Random(seed * 1_000_003 + user_index * SEED_STRIDE)

    def side(self, weight_pct: float) -> Side:
        return "candidate" if self._rng.random() * 100.0 < weight_pct else "baseline"

    def agreement(self, fraction: float) -> bool:
        return fraction > 0.0 and self._rng.random() < fraction


def _tagging_sink(sink: RowSink, side: Side) -> RowSink:
    def write(row: RequestRow) -> None:
        row.side = side
        sink(row)

    return write


def _hold(_row: RequestRow) -> None:
    """The second request of an agreement pair is written by its sender, once its cosine is known."""


def agreement_cosine(a: list[np.ndarray] | None, b: list[np.ndarray] | None) -> float | None:
    """The lowest cosine between two answers' vectors, input by input (None: an answer unreadable)."""
    if a is None or b is None or len(a) != len(b) or not a:
        return None
    lowest = 1.0
    for u, v in zip(a, b, strict=True):
        if u.shape != v.shape:
            return None
        norm = float(np.linalg.norm(u) * np.linalg.norm(v))
        lowest = min(lowest, float(u @ v) / norm if norm > 0 else 0.0)
    return lowest


@dataclass
class CanaryTraffic:
    """What the users of one process share in a canary run: each side's context and the current stage."""

    canary: Canary
    contexts: dict[Side, RunContext]
    held: dict[Side, RunContext]  # the same, for the second request of an agreement pair
    sink: RowSink
    stage_index: int = 0  # closed loop: set by the shape (local, master) or the master's message (workers)
    user_seq: Iterator[int] = field(default_factory=itertools.count)  # each user's side-draw seed offset

    @classmethod
    def build(cls, base: RunContext, candidate_info: dict[str, Any] | None) -> CanaryTraffic:
        """From the run's (baseline's) context: the candidate's has its own host, /info and dimension."""
        canary = base.scenario.canary
        dim = info_dimension(candidate_info)
        candidate = replace(
            base, host=canary.candidate_url.rstrip("/"), service_info=candidate_info,
            expected_dim=dim if dim is not None else base.expected_dim,
            dim_source="candidate /info" if dim is not None else base.dim_source,
        )
        sides: dict[Side, RunContext] = {"baseline": base, "candidate": candidate}
        return cls(
            canary=canary,
            contexts={side: replace(ctx, sink=_tagging_sink(base.sink, side)) for side, ctx in sides.items()},
            held={side: replace(ctx, sink=_hold) for side, ctx in sides.items()}, sink=base.sink,
        )

    def weight_pct(self, stage_index: int) -> float:
        stages = self.canary.stages_pct
        return stages[min(max(stage_index, 0), len(stages) - 1)]

    def send(
        self, clients: dict[Side, FastHttpSession], draw: SideDraw, payload: RequestPayload,
        t_intended_unix_s: float | None = None, stage: Stage | None = None,
    ) -> RequestRow:
        """Send one request to the drawn side (and, for an agreement sample, to the other); the first row."""
        index = stage[0] if stage is not None else self.stage_index
        side = draw.side(self.weight_pct(index))
        pair = draw.agreement(self.canary.agreement_fraction) and not payload.expect_failure
        if not pair or payload.reference is not None:  # a quality probe keeps its own cosine column
            return send_embeddings(clients[side], self.contexts[side], payload, t_intended_unix_s, stage)
        answers: list[bytes] = []
        row = send_embeddings(
            clients[side], self.contexts[side], payload, t_intended_unix_s, stage, on_answer=answers.append
        )
        if not row.ok or not answers:
            return row
        second: Side = "baseline" if side == "candidate" else "candidate"
        again: list[bytes] = []
        paired = send_embeddings(clients[second], self.held[second], payload, None, stage, on_answer=again.append)
        paired.side = second
        if paired.ok and again:
            paired.agreement_cosine = agreement_cosine(
                self.contexts[side].protocol.dense_vectors(answers[0]),
                self.held[second].protocol.dense_vectors(again[0]),
            )
        self.sink(paired)
        return row

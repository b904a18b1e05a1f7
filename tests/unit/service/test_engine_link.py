"""A front end's link to the engine process (service/engine_client.py), against a fake engine on a ZeroMQ socket:
deadlines, cancellations and the requests tokenised together in one turn of the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest
import zmq

from modelcore.model_folder import default_model_path
from service.batch_errors import DeadlineExceeded, TooManyTokens
from service.batch_job import BatchResult
from service.engine_client import TOKENIZE_TURN_INPUTS, RemoteBatcher
from service.engine_status import EngineState, Slot, StatusBlock
from service.engine_wire import (
    CANCEL,
    SUBMIT,
    arrived,
    open_socket,
    read_cancel,
    read_message,
    read_submission,
    reply_frames,
    result_reply,
)
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings
from service.tokenize_stage import FrontTokenizer

MODEL = "all-MiniLM-L6-v2"


class FakeEngine:
    """A ROUTER socket that records what front ends send and answers submissions after `answer_after_s`
    (None: never), each with one row per input holding its first token id."""

    def __init__(self, context: zmq.Context[bytes], endpoint: str, answer_after_s: float | None) -> None:
        self.socket = open_socket(context, zmq.ROUTER)
        self.socket.bind(endpoint)
        self.answer_after_s = answer_after_s
        self.submitted: list[list[list[int]]] = []
        self.cancelled: list[tuple[int, str]] = []
        self.messages: list[list[str]] = []  # the kinds of each message's entries

    def read(self) -> None:
        loop = asyncio.get_running_loop()
        for identity, frame in arrived(self.socket, copy=True):
            entries = read_message(frame)
            self.messages.append([entry["kind"] for entry in entries])
            for entry in entries:
                if entry["kind"] == CANCEL:
                    self.cancelled.append(read_cancel(entry))
                elif entry["kind"] == SUBMIT and self.answer_after_s is not None:
                    submission = read_submission(entry)
                    self.submitted.append(submission.token_ids)
                    vectors = np.array([[row[1]] for row in submission.token_ids], dtype=np.float32)
                    result = BatchResult(vectors, [], 0.0, 1.0, 0.0, len(vectors), 0, MODEL)
                    frames = [identity, *reply_frames([result_reply(submission.request_id, result)])]
                    loop.call_later(self.answer_after_s, self.socket.send_multipart, frames)


@asynccontextmanager
async def linked(
    tmp_path: Path, answer_after_s: float | None, max_request_tokens: int = 40
) -> AsyncIterator[tuple[RemoteBatcher, FakeEngine]]:
    loop = asyncio.get_running_loop()
    context: zmq.Context[bytes] = zmq.Context()
    endpoint = f"ipc://{tmp_path / 'engine.sock'}"
    engine = FakeEngine(context, endpoint, answer_after_s)
    status = StatusBlock.create(tmp_path / "status")
    status.set(Slot.STATE, EngineState.READY)
    socket = open_socket(context, zmq.DEALER)
    socket.connect(endpoint)
    tokenizer = FrontTokenizer(default_model_path(), 256, truncate=True)
    settings = ServiceSettings(max_request_tokens=max_request_tokens)
    batcher = RemoteBatcher(settings, status, socket, {MODEL: tokenizer}, MODEL, None, ServiceMetrics())
    fds = [int(engine.socket.getsockopt(zmq.FD)), int(socket.getsockopt(zmq.FD))]
    loop.add_reader(fds[0], engine.read)
    loop.add_reader(fds[1], batcher.read_replies)
    try:
        yield batcher, engine
    finally:
        for fd in fds:
            loop.remove_reader(fd)
        context.destroy(linger=0)
        status.close()


def test_a_request_the_engine_does_not_answer_fails_at_its_deadline_and_is_cancelled_there(tmp_path: Path) -> None:
    async def run() -> tuple[float, list[tuple[int, str]]]:
        async with linked(tmp_path, answer_after_s=None) as (batcher, engine):
            t_start_s = time.perf_counter()
            with pytest.raises(DeadlineExceeded):
                await asyncio.wait_for(batcher.submit(["never answered"], deadline_ms=150), 5)
            took_s = time.perf_counter() - t_start_s
            for _ in range(100):  # the cancel crosses the socket
                if engine.cancelled:
                    break
                await asyncio.sleep(0.01)
            return took_s, engine.cancelled

    took_s, cancelled = asyncio.run(run())
    assert 0.14 <= took_s < 1.0
    assert [reason for _, reason in cancelled] == ["deadline"]


def test_an_answer_in_time_is_not_cancelled(tmp_path: Path) -> None:
    async def run() -> tuple[BatchResult, list[tuple[int, str]]]:
        async with linked(tmp_path, answer_after_s=0.05) as (batcher, engine):
            result = await batcher.submit(["answered in time"], deadline_ms=2000)
            await asyncio.sleep(0.1)
            return result, engine.cancelled

    result, cancelled = asyncio.run(run())
    assert result.model == MODEL and result.embeddings.shape == (1, 1)
    assert cancelled == []


def test_requests_tokenised_together_each_get_their_own_ids_and_failures(tmp_path: Path) -> None:
    texts = [f"request number {i} about capacity" for i in range(6)]
    too_many = ["a text " * 30]  # over the request budget of 40 tokens

    async def run() -> tuple[list[BatchResult | BaseException], list[list[list[int]]], list[list[str]]]:
        async with linked(tmp_path, answer_after_s=0.0) as (batcher, engine):
            requests = [batcher.submit([text], deadline_ms=5000) for text in texts]
            requests.insert(3, batcher.submit(too_many, deadline_ms=5000))
            outcomes = await asyncio.gather(*requests, return_exceptions=True)
            return outcomes, engine.submitted, engine.messages

    outcomes, submitted, messages = asyncio.run(run())
    assert messages == [[SUBMIT] * len(texts)]  # submitted in the same turn of the loop: one message
    tokenizer = FrontTokenizer(default_model_path(), 256, truncate=True)
    assert isinstance(outcomes[3], TooManyTokens)
    answered = [outcome for index, outcome in enumerate(outcomes) if index != 3]
    expected = [tokenizer.token_ids([text], 40) for text in texts]
    assert sorted(submitted) == sorted(expected)  # each request's own ids, none mixed with another's
    for outcome, ids in zip(answered, expected, strict=True):
        assert isinstance(outcome, BatchResult)
        assert outcome.embeddings[0, 0] == ids[0][1]  # the engine's answer reached the request that asked
        assert outcome.token_counts == [len(ids[0])]


def test_a_burst_is_tokenised_a_bounded_number_of_inputs_a_turn(tmp_path: Path) -> None:
    per_request = 60
    assert 2 * per_request < TOKENIZE_TURN_INPUTS < 3 * per_request  # three requests in the first turn, then one
    tokenised: list[int] = []

    async def run() -> tuple[int, list[BatchResult | BaseException]]:
        async with linked(tmp_path, answer_after_s=0.0, max_request_tokens=100_000) as (batcher, _):
            tokenizer = batcher.tokenizers[MODEL]
            own = tokenizer.token_ids

            def counted(texts: list[str], budget_tokens: int) -> list[list[int]]:
                tokenised.append(len(texts))
                return own(texts, budget_tokens)

            tokenizer.token_ids = counted  # type: ignore[method-assign]
            texts = [[f"request {r} input {i}" for i in range(per_request)] for r in range(4)]
            requests = [asyncio.ensure_future(batcher.submit(t, deadline_ms=5000)) for t in texts]
            await asyncio.sleep(0)  # every request reaches the engine link and queues its tokenising
            seen_between: list[int] = []
            asyncio.get_running_loop().call_soon(lambda: seen_between.append(len(tokenised)))
            outcomes = await asyncio.gather(*requests, return_exceptions=True)
            return seen_between[0], outcomes

    between, outcomes = asyncio.run(run())
    assert between == 3  # another callback ran after the first turn's three requests, before the fourth
    assert tokenised == [per_request] * 4
    assert all(isinstance(outcome, BatchResult) for outcome in outcomes)

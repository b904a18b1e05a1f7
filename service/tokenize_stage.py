"""One tokeniser call over slices of several requests, and the queue items it yields.

A request whose text the tokeniser cannot process fails alone (the slices are retried one request at a
time); an input over the model's limit, or a request over its token budget, fails its request only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from modelcore.encoder import Encoder
from service.batch_errors import BatcherError, InputTooLong, InvalidInput, TooManyTokens
from service.batch_job import BatchJob, Claim
from service.fair_queue import Item

log = logging.getLogger("service.batcher")


@dataclass
class Tokenized:
    """Token ids of the claims that survived, in claim order, with the requests that failed on the way."""

    ids: list[list[int]]
    claims: list[Claim]
    failures: list[tuple[BatchJob, BatcherError]]
    t_start_s: float
    t_end_s: float

    def items(
        self, max_tokens: int, budget_tokens: int
    ) -> tuple[list[Item[BatchJob]], list[tuple[BatchJob, BatcherError]]]:
        """Queue items of every input whose request is still whole, and every request that failed."""
        failures = list(self.failures)
        items: list[Item[BatchJob]] = []
        offset = 0
        for job, start, end in self.claims:
            ids = self.ids[offset : offset + end - start]
            offset += end - start
            job.tokenize_s += self.t_end_s - self.t_start_s
            too_long = next((i for i, row in enumerate(ids) if len(row) > max_tokens), None)
            if too_long is not None:
                failures.append((job, InputTooLong(start + too_long, max_tokens)))
                continue
            counts = [len(row) for row in ids]
            job.token_counts[start:end] = counts
            job.tokens += sum(counts)
            if budget_tokens and job.tokens > budget_tokens:
                failures.append((job, TooManyTokens(job.tokens, budget_tokens, complete=end == job.size)))
                continue
            items += [Item(job, start + i, row, self.t_end_s) for i, row in enumerate(ids)]
        return items, failures


def tokenize_claims(encoder: Encoder, claims: list[Claim], limit: int) -> Tokenized:
    """Tokenise every claimed slice in one call; when that call fails, one request at a time."""
    t_start_s = time.perf_counter()
    failures: list[tuple[BatchJob, BatcherError]] = []
    try:
        ids = encoder.tokenize([text for job, s, e in claims for text in job.texts[s:e]], limit)
    except Exception:  # one request's bad text must fail only that request: retry them one by one
        ids, survivors = [], []
        for job, start, end in claims:
            try:
                ids += encoder.tokenize(job.texts[start:end], limit)
                survivors.append((job, start, end))
            except Exception as exc:
                log.warning("tokenisation of one request failed: %s", exc)
                failures.append((job, InvalidInput(f"the tokeniser could not process the input: {exc}")))
        claims = survivors
    return Tokenized(ids, claims, failures, t_start_s, time.perf_counter())

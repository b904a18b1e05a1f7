"""Tokenisation with the model's token limit and the request's token budget, in both layouts: the batcher's
tokeniser stage (one call over slices of several requests, yielding queue items) and the front ends' own
tokeniser (the model's tokenizer.json through the `tokenizers` library, without torch or transformers).

Both check inputs with `checked_counts`, so both layouts answer a request alike. A request whose text the
tokeniser cannot process fails alone (the batcher's slices are retried one request at a time); an input over
the model's limit, or a request over its token budget, fails its request only."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from embedperf.errors import ModelLoadError
from modelcore.encoder import Encoder
from service.batch_errors import BatcherError, InputTooLong, InvalidInput, TooManyTokens
from service.batch_job import TOKENIZE_SLICE, BatchJob, Claim
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
            try:
                counts = checked_counts(ids, start, max_tokens, job.tokens, budget_tokens, end == job.size)
            except BatcherError as exc:  # kept without its traceback, whose frame holds `failures` (a cycle)
                failures.append((job, exc.with_traceback(None)))
                continue
            job.token_counts[start:end] = counts
            job.tokens += sum(counts)
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


def checked_counts(
    rows: list[list[int]], start: int, max_tokens: int, tokens_before: int, budget_tokens: int, last: bool
) -> list[int]:
    """Token counts of rows, a request's inputs from `start` (after tokens_before tokens), or InputTooLong, or
    TooManyTokens over budget_tokens (0: no budget; last: rows end the request, so its count is complete)."""
    counts = [len(row) for row in rows]
    too_long = next((i for i, count in enumerate(counts) if count > max_tokens), None)
    if too_long is not None:
        raise InputTooLong(start + too_long, max_tokens)
    tokens = tokens_before + sum(counts)
    if budget_tokens and tokens > budget_tokens:
        raise TooManyTokens(tokens, budget_tokens, complete=last)
    return counts


class FrontTokenizer:
    """One model's tokeniser with its limit: truncate mode cuts at max_tokens, reject mode fails longer inputs."""

    def __init__(self, model_path: Path, max_tokens: int, truncate: bool) -> None:
        file = model_path / "tokenizer.json"
        if not file.is_file():
            raise ModelLoadError(
                f"{model_path} has no tokenizer.json (a fast tokeniser), which the front ends need; "
                "save the model's tokenizer with a recent transformers, or serve it with --http-workers 0"
            )
        self.tokenizer = Tokenizer.from_file(str(file))
        self.tokenizer.no_padding()
        self.max_tokens = max_tokens
        # reject mode keeps one token more, so that an input over the limit is seen and refused
        self.tokenizer.enable_truncation(max_tokens if truncate else max_tokens + 1)

    def token_ids(self, texts: list[str], budget_tokens: int) -> list[list[int]]:
        """Token ids with special tokens, a slice of TOKENIZE_SLICE inputs at a time, so a request over its
        budget is refused after the slice that crossed it; raises InvalidInput, InputTooLong or TooManyTokens."""
        rows: list[list[int]] = []
        tokens = 0
        for start in range(0, len(texts), TOKENIZE_SLICE):
            chunk = texts[start : start + TOKENIZE_SLICE]
            try:  # one text: encode, which skips the batch call's thread-pool hand-off
                encodings = (
                    [self.tokenizer.encode(chunk[0], add_special_tokens=True)]
                    if len(chunk) == 1
                    else self.tokenizer.encode_batch(chunk, add_special_tokens=True)
                )
            except Exception as exc:  # the tokeniser's own refusal of a text
                raise InvalidInput(f"the tokeniser could not process the input: {exc}") from None
            ids = [encoding.ids for encoding in encodings]
            last = start + TOKENIZE_SLICE >= len(texts)
            tokens += sum(checked_counts(ids, start, self.max_tokens, tokens, budget_tokens, last))
            rows += ids
        return rows

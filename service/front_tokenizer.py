"""Tokenisation in the front ends: the model's own fast tokeniser (its tokenizer.json, through the `tokenizers`
library, without torch or transformers), the model's token limit and the request's token budget.

The engine receives token ids only; the checks here are those its tokeniser stage makes in the one-process
layout (service/tokenize_stage.py), with the same errors, so both layouts answer a request alike.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from embedperf.errors import ModelLoadError
from service.batch_errors import InputTooLong, InvalidInput, TooManyTokens
from service.batch_job import TOKENIZE_SLICE


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
            for offset, encoding in enumerate(encodings):
                if len(encoding.ids) > self.max_tokens:
                    raise InputTooLong(start + offset, self.max_tokens)
                rows.append(encoding.ids)
                tokens += len(encoding.ids)
            if budget_tokens and tokens > budget_tokens:
                raise TooManyTokens(tokens, budget_tokens, complete=start + TOKENIZE_SLICE >= len(texts))
        return rows

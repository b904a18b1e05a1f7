"""Request payloads: corpus, dataset or synthetic texts, weighted inputs per request, validation edge cases.
Synthetic texts (`payload.tokens`) are cut from the corpora's words to a sampled token length: exact with the
target's tokenizer when it is on this machine, else WORDS_PER_TOKEN words per token."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from embedperf.errors import ConfigError
from loadgen.traffic.quality import load_reference_set
from scenarios.datasets import load_dataset
from scenarios.loader import CORPORA_DIR
from scenarios.models import DocumentRange, Payload, Rerank, TokenLengths

LONG_TEXT_CHARS = 5_000
WORDS_PER_TOKEN = 0.75  # English words per model token, the common rule of thumb (no tokenizer at hand)
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "vocab.txt", "tokenizer_config.json")
VALIDATION_PREFIX = "validation:"


@dataclass(slots=True)
class RequestPayload:
    """What one request sends and how its outcome is judged (not frozen: that costs three times as much)."""

    inputs: list[str]  # the texts to embed; for rerank, the documents
    endpoint: str  # label in request rows and Locust stats
    expect_failure: bool = False
    reference: np.ndarray | None = None  # quality probe: the unit fp32 embedding its answer should match
    query: str | None = None  # rerank: the text the documents are ranked against

    @property
    def input_chars(self) -> int:
        return sum(map(len, self.inputs)) + (len(self.query) if self.query is not None else 0)

    @property
    def texts(self) -> int:
        """Texts the request sends (the query counts as one): the row's n_inputs."""
        return len(self.inputs) + (self.query is not None)

    @property
    def documents(self) -> int | None:
        """Documents to rank (None unless rerank): the row's documents."""
        return len(self.inputs) if self.query is not None else None


def load_corpus(name: str, corpora_dir: Path = CORPORA_DIR) -> list[str]:
    """Non-empty lines of `<corpora_dir>/<name>.txt`."""
    path = corpora_dir / f"{name}.txt"
    if not path.is_file():
        available = ", ".join(sorted(p.stem for p in corpora_dir.glob("*.txt")))
        raise ConfigError(f"payload corpus {name!r} not found in {corpora_dir}; available: {available}")
    texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not texts:
        raise ConfigError(f"payload corpus {path} is empty")
    return texts


def validation_cases(corpora_dir: Path = CORPORA_DIR) -> list[RequestPayload]:
    """The edge cases users check by hand; the empty input must be rejected by the target."""
    long_source = " ".join(load_corpus("en_long", corpora_dir))
    long_text = (long_source * (LONG_TEXT_CHARS // max(len(long_source), 1) + 1))[:LONG_TEXT_CHARS]
    return [
        RequestPayload(["你好"], f"{VALIDATION_PREFIX}zh_phrase"),
        RequestPayload([long_text], f"{VALIDATION_PREFIX}long_5000"),
        RequestPayload([""], f"{VALIDATION_PREFIX}empty_must_fail", expect_failure=True),
    ]


TokenCounter = Callable[[list[str]], list[int]]


@lru_cache(maxsize=4)
def _hf_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer  # transformers (and torch) load only for a scenario's tokenizer

    return AutoTokenizer.from_pretrained(path)


def local_tokenizer(spec: TokenLengths, service_info: dict[str, Any] | None) -> tuple[TokenCounter, int] | None:
    """(words -> token counts, special tokens per text) from the target's tokenizer (`auto`: its /info model
    directory when it is here; or a path), else None."""
    if spec.tokenizer == "approx":
        return None
    if spec.tokenizer == "auto":
        path = str((service_info or {}).get("model_path") or "")
        if not path or not any((Path(path) / f).is_file() for f in TOKENIZER_FILES):
            return None
    else:
        path = spec.tokenizer
        if not Path(path).is_dir():
            raise ConfigError(
                f"payload.tokens.tokenizer {path} is not a directory; give a local tokenizer/model directory, "
                "auto (the target's, when local) or approx"
            )
    tok = _hf_tokenizer(path)

    def count(words: list[str]) -> list[int]:
        return [len(ids) for ids in tok(words, add_special_tokens=False)["input_ids"]]

    return count, len(tok("")["input_ids"])


def approx_tokens(words: list[str]) -> list[float]:
    """Token estimate per word: one per CJK character, 1 / WORDS_PER_TOKEN per other word."""
    cjk = [sum(1 for ch in w if "\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef") for w in words]
    return [n + (1.0 / WORDS_PER_TOKEN if n < len(word) else 0.0) for n, word in zip(cjk, words, strict=True)]


class SyntheticTexts:
    """Texts of a sampled token length, cut from a pool of words at a random place."""

    def __init__(self, spec: TokenLengths, words: list[str], tokenizer: tuple[TokenCounter, int] | None):
        self.spec = spec
        self.words = words
        self.exact = tokenizer is not None
        if tokenizer is not None:
            counter, self.special = tokenizer
            self.word_tokens = [float(n) for n in counter(words)]
        else:
            self.special, self.word_tokens = 0, approx_tokens(words)
        smallest = min((n, w) for w, n in zip(words, self.word_tokens, strict=True) if n > 0)
        self.filler, self.filler_tokens = (
            ("the", 1.0) if self.exact and "the" in words else (smallest[1], smallest[0])
        )
        if spec.distribution == "lognormal" and spec.std > 0:
            self._sigma = math.sqrt(math.log1p((spec.std / spec.mean) ** 2))
            self._mu = math.log(spec.mean) - self._sigma**2 / 2.0

    def length(self, rng: random.Random) -> int:
        """Tokens for the next text (clipped to [min, max], so clipping shifts the mean slightly)."""
        spec = self.spec
        if spec.distribution == "uniform":
            return rng.randint(spec.min, spec.max)
        if spec.distribution == "normal":
            value = rng.gauss(spec.mean, spec.std)
        elif spec.distribution == "lognormal" and spec.std > 0:
            value = rng.lognormvariate(self._mu, self._sigma)
        else:
            value = spec.mean
        return min(max(round(value), spec.min), spec.max)

    def text(self, rng: random.Random) -> str:
        """Words from a random place while they fit the sampled length, topped up with the shortest word."""
        budget = max(self.length(rng) - self.special, 1)
        start = rng.randrange(len(self.words))
        picked: list[str] = []
        total = 0.0
        for i in range(len(self.words)):
            j = (start + i) % len(self.words)
            n = self.word_tokens[j]
            if 0 < n <= budget - total:
                picked.append(self.words[j])
                total += n
            if budget - total < self.filler_tokens:
                break
        while budget - total >= self.filler_tokens - 1e-9 and (self.exact or budget - total >= self.filler_tokens / 2):
            picked.append(self.filler)
            total += self.filler_tokens
        return " ".join(picked)


def prepare(
    spec: Payload, service_info: dict[str, Any] | None, corpora_dir: Path = CORPORA_DIR
) -> SyntheticTexts | None:
    """The source for `payload.tokens` (or None), built before the first step: a tokenizer loads slowly."""
    if spec.tokens is None:
        return None
    model_path = str((service_info or {}).get("model_path") or "")
    return _synthetic(spec.tokens.model_dump_json(), tuple(spec.corpora), model_path, str(corpora_dir))


@lru_cache(maxsize=8)
def _synthetic(tokens_json: str, corpora: tuple[str, ...], model_path: str, corpora_dir: str) -> SyntheticTexts:
    tokens = TokenLengths.model_validate_json(tokens_json)
    words = " ".join(t for name in corpora for t in load_corpus(name, Path(corpora_dir))).split()
    return SyntheticTexts(tokens, words, local_tokenizer(tokens, {"model_path": model_path} if model_path else None))


def document_counts(spec: Rerank) -> Callable[[random.Random], int]:
    """Documents per rerank request: fixed, uniform in [min, max], or drawn by weight."""
    documents = spec.documents
    if isinstance(documents, int):
        return lambda rng: documents
    if isinstance(documents, DocumentRange):
        low, high = documents.min, documents.max
        return lambda rng: rng.randint(low, high)
    sizes, weights = [w.n for w in documents], [w.weight for w in documents]
    return lambda rng: rng.choices(sizes, weights)[0]


class PayloadSampler:
    """Draws payloads for one user; deterministic per seed so runs send comparable texts."""

    def __init__(
        self, spec: Payload, endpoint: str, seed_offset: int = 0, corpora_dir: Path = CORPORA_DIR,
        service_info: dict[str, Any] | None = None,
    ):
        corpus_texts = [t for name in spec.corpora for t in load_corpus(name, corpora_dir)]
        self.texts: list[str] = load_dataset(spec.dataset) if spec.dataset is not None else corpus_texts
        self.synthetic = prepare(spec, service_info, corpora_dir)
        self.sizes = [w.n for w in spec.inputs_per_request]
        self.weights = [w.weight for w in spec.inputs_per_request]
        self.rerank = spec.task == "rerank"
        self.documents_per_request = document_counts(spec.rerank) if spec.rerank is not None else None
        self.validation_mix = spec.validation_mix
        self.validation = validation_cases(corpora_dir) if spec.validation_mix > 0 else []
        self.endpoint = endpoint
        self.repeat_fraction = spec.repeat_fraction
        self._unique_prefix = f"{seed_offset}.{os.getpid()}."
        self._unique_count = 0
        self._rng = random.Random(spec.seed + seed_offset)
        probes = spec.quality_probes
        self.probe_fraction = probes.fraction if probes is not None else 0.0
        self.probe_texts: list[str] = []
        self.probe_vectors: np.ndarray = np.empty((0, 0))
        if probes is not None:
            self.probe_texts, self.probe_vectors = load_reference_set(probes.reference)

    def _text(self) -> str:
        if self.synthetic is not None:  # a random cut of the word pool; a tag would change its length
            return self.synthetic.text(self._rng)
        return self._source_text()

    def _source_text(self) -> str:
        """A text of the corpora or dataset, tagged unique unless it is one of the repeats."""
        text = self._rng.choice(self.texts)
        if self.repeat_fraction >= 1.0 or (self.repeat_fraction > 0.0 and self._rng.random() < self.repeat_fraction):
            return text  # no draw at 0: it could never pass, and this runs once per input
        self._unique_count += 1
        return f"{text} (#{self._unique_prefix}{self._unique_count})"

    def next(self) -> RequestPayload:
        if self.rerank:
            assert self.documents_per_request is not None
            documents = [self._text() for _ in range(self.documents_per_request(self._rng))]
            return RequestPayload(documents, self.endpoint, query=self._source_text())
        if self.validation and self._rng.random() < self.validation_mix:
            return self._rng.choice(self.validation)
        if self.probe_fraction and self._rng.random() < self.probe_fraction:
            i = self._rng.randrange(len(self.probe_texts))
            return RequestPayload([self.probe_texts[i]], self.endpoint, reference=self.probe_vectors[i])
        n = self._rng.choices(self.sizes, self.weights)[0] if len(self.sizes) > 1 else self.sizes[0]
        if n == 1:  # the common case, without a comprehension's setup (once per request)
            return RequestPayload([self._text()], self.endpoint)
        return RequestPayload([self._text() for _ in range(n)], self.endpoint)

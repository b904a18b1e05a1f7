"""Request payloads: corpus texts, weighted inputs per request and the opt-in validation edge cases."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from embedperf.errors import ConfigError
from scenarios.loader import CORPORA_DIR
from scenarios.models import Payload

LONG_TEXT_CHARS = 5_000
VALIDATION_PREFIX = "validation:"


@dataclass(frozen=True, slots=True)
class RequestPayload:
    """What one request sends and how its outcome is judged."""

    inputs: list[str]
    endpoint: str  # label in request rows and Locust stats
    expect_failure: bool = False

    @property
    def input_chars(self) -> int:
        return sum(len(t) for t in self.inputs)


def available_corpora(corpora_dir: Path = CORPORA_DIR) -> list[str]:
    return sorted(p.stem for p in corpora_dir.glob("*.txt"))


def load_corpus(name: str, corpora_dir: Path = CORPORA_DIR) -> list[str]:
    """Non-empty lines of `<corpora_dir>/<name>.txt`."""
    path = corpora_dir / f"{name}.txt"
    if not path.is_file():
        raise ConfigError(
            f"payload corpus {name!r} not found in {corpora_dir}; available: {', '.join(available_corpora(corpora_dir))}"
        )
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


class PayloadSampler:
    """Draws payloads for one user; deterministic per seed so runs send comparable texts."""

    def __init__(self, spec: Payload, endpoint: str, seed_offset: int = 0, corpora_dir: Path = CORPORA_DIR):
        self.texts: list[str] = [t for name in spec.corpora for t in load_corpus(name, corpora_dir)]
        self.sizes = [w.n for w in spec.inputs_per_request]
        self.weights = [w.weight for w in spec.inputs_per_request]
        self.validation_mix = spec.validation_mix
        self.validation = validation_cases(corpora_dir) if spec.validation_mix > 0 else []
        self.endpoint = endpoint
        self.repeat_fraction = spec.repeat_fraction
        self._unique_prefix = f"{seed_offset}.{os.getpid()}."
        self._unique_count = 0
        self._rng = random.Random(spec.seed + seed_offset)

    def _text(self) -> str:
        text = self._rng.choice(self.texts)
        if self.repeat_fraction >= 1.0 or self._rng.random() < self.repeat_fraction:
            return text
        self._unique_count += 1
        return f"{text} (#{self._unique_prefix}{self._unique_count})"

    def next(self) -> RequestPayload:
        if self.validation and self._rng.random() < self.validation_mix:
            return self._rng.choice(self.validation)
        n = self._rng.choices(self.sizes, self.weights)[0] if len(self.sizes) > 1 else self.sizes[0]
        return RequestPayload([self._text() for _ in range(n)], self.endpoint)

"""The fixed evaluation corpus for precision checks: Chinese, English and mixed; short, medium, long."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

EVAL_CORPUS_PATH = Path(__file__).with_name("eval_corpus.jsonl")


@dataclass(frozen=True, slots=True)
class EvalText:
    id: str
    lang: str
    length: str
    text: str


def load_eval_corpus(path: Path = EVAL_CORPUS_PATH) -> list[EvalText]:
    """Every text of the corpus, in file order (the order is part of the fixed corpus)."""
    items = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                raw = json.loads(line)
                items.append(EvalText(raw["id"], raw["lang"], raw["length"], raw["text"]))
    return items

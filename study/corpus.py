"""Evaluation texts for precision checks: the shipped corpus, or the user's own JSONL set with label columns."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from embedperf.errors import ConfigError

EVAL_CORPUS_PATH = Path(__file__).with_name("eval_corpus.jsonl")
# The shipped corpus is broken down by these label columns besides language and length.
SHIPPED_LABEL_FIELDS: tuple[str, ...] = ("domain", "kind")
NO_LABEL = "(none)"
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# Share of CJK characters among CJK characters and Latin words (a character is about a word) that makes a
# text "zh", or at most 1 - this "en", when the set has no lang column; in between it is "mixed".
SCRIPT_MAJORITY = 0.8


@dataclass(frozen=True, slots=True)
class EvalText:
    """One text; `kind` "query" makes it a retrieval query against the other kinds (the documents)."""

    id: str
    lang: str
    text: str
    kind: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvalSet:
    """The texts of one precision check, with where they came from and which label columns they carry."""

    texts: list[EvalText]
    source: str
    label_fields: tuple[str, ...]


def detect_lang(text: str) -> str:
    """zh / en / mixed by script (CJK characters against Latin words), for sets without a lang column."""
    cjk, latin = len(_CJK.findall(text)), len(_LATIN_WORD.findall(text))
    if cjk + latin == 0:
        return "other"
    share = cjk / (cjk + latin)
    if share >= SCRIPT_MAJORITY:
        return "zh"
    if share <= 1.0 - SCRIPT_MAJORITY:
        return "en"
    return "mixed"


def load_eval_corpus(path: Path = EVAL_CORPUS_PATH) -> list[EvalText]:
    """Every text of the shipped corpus, in file order; a line without source and licence is refused."""
    items = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            if not raw.get("source") or not raw.get("license"):
                raise ConfigError(f"{path}:{number}: every corpus text needs a 'source' and a 'license'")
            labels = {name: str(raw[name]) for name in SHIPPED_LABEL_FIELDS}
            items.append(EvalText(raw["id"], raw["lang"], raw["text"], str(raw["kind"]), labels))
    return items


def shipped_eval_set() -> EvalSet:
    return EvalSet(load_eval_corpus(), "shipped evaluation corpus", SHIPPED_LABEL_FIELDS)


def load_dataset(path: Path, text_field: str = "text", label_fields: tuple[str, ...] = ()) -> EvalSet:
    """The user's JSONL set: `text_field`, optional `id`, `lang` (else detected), `kind` and label fields."""
    if not path.is_file():
        raise ConfigError(f"--dataset {path} does not exist; pass a JSONL file with one object per line")
    items: list[EvalText] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{number} is not JSON ({exc}); the dataset is JSONL") from exc
            if not isinstance(raw, dict) or not isinstance(raw.get(text_field), str):
                keys = ", ".join(sorted(raw)) if isinstance(raw, dict) else type(raw).__name__
                raise ConfigError(
                    f"{path}:{number} has no string field {text_field!r} (it has: {keys}); pass --field NAME"
                )
            text = raw[text_field]
            labels = {name: str(raw.get(name, NO_LABEL)) for name in label_fields}
            lang, kind = str(raw.get("lang") or detect_lang(text)), str(raw.get("kind", ""))
            items.append(EvalText(str(raw.get("id", f"line-{number}")), lang, text, kind, labels))
    if len(items) < 2:
        raise ConfigError(f"--dataset {path} has {len(items)} text(s); a precision check needs at least two")
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"--dataset {path} repeats an id; every line needs its own 'id' (or none at all)")
    return EvalSet(items, str(path), tuple(label_fields))

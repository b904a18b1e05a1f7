"""Agreement per domain: a damaged domain fails while the mean passes; bands, scripts and the user's dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embedperf.errors import ConfigError
from study.corpus import EvalText, detect_lang, load_dataset
from study.precision.compare import compare_embeddings
from study.precision.domains import domain_breakdown, length_band
from study.precision.gate import PrecisionGates

STANDARD = PrecisionGates.for_profile("standard")


def _rotate(vectors: np.ndarray, rows: list[int], cosine: float, seed: int = 0) -> np.ndarray:
    """A copy with the given rows turned to exactly `cosine` from where they were."""
    out = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    for row in rows:
        away = rng.normal(size=out.shape[1])
        away -= away @ out[row] * out[row]
        away /= np.linalg.norm(away)
        out[row] = cosine * out[row] + np.sqrt(1 - cosine**2) * away
    return out


def test_a_damaged_domain_fails_while_the_mean_passes() -> None:
    rng = np.random.default_rng(3)
    reference = rng.normal(size=(100, 32))
    domains = ["legal" if i % 25 == 0 else ("retail" if i % 2 else "news") for i in range(100)]
    texts = [
        EvalText(id=f"t{i}", lang="en", text=f"text {i}", labels={"domain": d}) for i, d in enumerate(domains)
    ]
    damaged = [i for i, d in enumerate(domains) if d == "legal"]
    candidate = _rotate(reference, damaged, 0.85)
    result = compare_embeddings(
        reference, candidate, texts, candidate_name="x", gates=STANDARD, label_fields=["domain"]
    )
    assert result.cosine_mean >= STANDARD.min_mean_cosine  # the mean alone would pass
    assert [d.label for d in result.failing_domains] == ["domain=legal"]
    assert not result.passed and "domain=legal" in result.failures[0]
    legal = result.failing_domains[0]
    assert legal.n == 4 and legal.cosine_mean == pytest.approx(0.85)
    assert {w.id for w in legal.worst} <= {f"t{i}" for i in damaged} and len(legal.worst) == 3
    assert {w.id for w in result.worst[:4]} == {f"t{i}" for i in damaged}  # the worst overall, too


def test_a_domain_fails_on_its_p5_even_when_its_mean_passes() -> None:
    reference = np.eye(40, 8, k=0) + 0.1
    texts = [EvalText(id=f"t{i}", lang="en", text="x", labels={"d": "a"}) for i in range(40)]
    candidate = _rotate(reference, [0, 1, 2], 0.9)
    cosine = np.sum(candidate * reference / np.linalg.norm(reference, axis=1, keepdims=True), axis=1)
    [group] = [d for d in domain_breakdown(cosine, texts, None, ["d"], 0.98) if d.axis == "d"]
    assert group.cosine_mean >= 0.99 and group.cosine_p5 < 0.98 and not group.passed


def test_length_bands_by_tokens() -> None:
    assert [length_band(n) for n in (1, 32, 33, 128, 129, 512)] == [
        "1–32 tokens",
        "1–32 tokens",
        "33–128 tokens",
        "33–128 tokens",
        ">128 tokens",
        ">128 tokens",
    ]


def test_language_by_script() -> None:
    assert detect_lang("How do I return a pair of shoes?") == "en"
    assert detect_lang("INT8量化可以压缩权重，通常也能加快CPU上的矩阵乘法。") == "zh"
    assert detect_lang("The queue grew without bound. 无限增长的队列会掩盖过载。") == "mixed"
    assert detect_lang("12345 !!") == "other"


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_the_users_dataset_with_a_label_column(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "texts.jsonl",
        [
            {"body": "Where is my parcel?", "domain": "support", "kind": "query"},
            {"body": "退货需要在三十天内申请。", "domain": "support"},
            {"id": "x9", "body": "Quarterly revenue rose.", "lang": "en"},
        ],
    )
    evalset = load_dataset(path, "body", ("domain",))
    assert [(t.id, t.lang, t.kind, t.labels["domain"]) for t in evalset.texts] == [
        ("line-1", "en", "query", "support"),
        ("line-2", "zh", "", "support"),
        ("x9", "en", "", "(none)"),
    ]
    assert evalset.label_fields == ("domain",) and evalset.source == str(path)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"text": "a"}, {"body": "b"}], "has no string field 'text' (it has: body); pass --field NAME"),
        ([{"text": "a"}], "a precision check needs at least two"),
        ([{"id": 1, "text": "a"}, {"id": 1, "text": "b"}], "repeats an id"),
    ],
)
def test_a_dataset_the_check_cannot_use_says_what_to_fix(
    tmp_path: Path, rows: list[object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_dataset(_write(tmp_path / "t.jsonl", rows))


def test_a_dataset_line_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"t.jsonl:2 is not JSON"):
        load_dataset(path)

"""payload.dataset readers and their load-time errors; payload.tokens lengths; the new scenario fields."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from embedperf.errors import ConfigError
from loadgen.traffic.payloads import PayloadSampler, SyntheticTexts, approx_tokens, local_tokenizer
from scenarios.datasets import load_dataset
from scenarios.loader import load_scenario
from scenarios.models import Dataset, Payload, TokenLengths

TEXTS = ["first text", "second, longer text", "第三个文本"]


def _write(kind: str, path: Path, field: str = "body") -> Path:
    if kind == "jsonl":
        path.write_text(
            "\n".join(json.dumps({field: t, "id": i}) for i, t in enumerate(TEXTS)) + "\n", "utf-8"
        )
    elif kind == "csv":
        path.write_text(f"id,{field}\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(TEXTS)), "utf-8")
    elif kind == "parquet":
        pq.write_table(pa.table({field: TEXTS, "id": list(range(len(TEXTS)))}), path)
    else:
        path.write_text("\n".join(TEXTS) + "\n\n", "utf-8")
    return path


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet", "txt"])
def test_every_file_type_reads_the_texts(tmp_path: Path, kind: str) -> None:
    path = _write(kind, tmp_path / f"d.{kind}")
    assert load_dataset(Dataset(path=str(path), field="body")) == TEXTS


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_missing_field_names_the_fields_there(tmp_path: Path, kind: str) -> None:
    path = _write(kind, tmp_path / f"d.{kind}")
    with pytest.raises(ConfigError, match="no field 'text'.*body"):
        load_dataset(Dataset(path=str(path)))


def _scenario(tmp_path: Path, payload: dict[str, object]) -> Path:
    doc = {"name": "mine", "kind": "ramp", "payload": payload, "steps": [{"users": 1, "duration_s": 2}]}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(doc), "utf-8")
    return path


def test_dataset_errors_stop_the_scenario_at_load_time(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_scenario(str(_scenario(tmp_path, {"dataset": {"path": "nowhere.jsonl"}})))
    (tmp_path / "empty.txt").write_text("\n  \n", "utf-8")
    with pytest.raises(ConfigError, match="no non-empty text"):
        load_scenario(str(_scenario(tmp_path, {"dataset": {"path": "empty.txt"}})))
    _write("jsonl", tmp_path / "texts.jsonl")
    with pytest.raises(ConfigError, match="no field 'text'"):
        load_scenario(str(_scenario(tmp_path, {"dataset": {"path": "texts.jsonl"}})))
    scenario = load_scenario(str(_scenario(tmp_path, {"dataset": {"path": "texts.jsonl", "field": "body"}})))
    assert scenario.payload.dataset is not None
    assert (
        Path(scenario.payload.dataset.path) == (tmp_path / "texts.jsonl").resolve()
    )  # beside the scenario file


def test_dataset_sampling_follows_the_seed(tmp_path: Path) -> None:
    path = _write("jsonl", tmp_path / "d.jsonl")
    spec = Payload.model_validate({"dataset": {"path": str(path), "field": "body"}, "repeat_fraction": 1.0})
    a = PayloadSampler(spec, "/e")
    b = PayloadSampler(spec, "/e")
    seq_a = [a.next().inputs[0] for _ in range(20)]
    assert seq_a == [b.next().inputs[0] for _ in range(20)]
    assert set(seq_a) <= set(TEXTS) and len(set(seq_a)) > 1


def test_dataset_and_tokens_are_exclusive() -> None:
    with pytest.raises(ValueError, match="exclusive"):
        Payload.model_validate({"dataset": {"path": "x.txt"}, "tokens": {"mean": 10}})


WORDS = (
    "the quick brown fox jumps over a lazy dog while capacity planning needs exact figures " * 20
).split()


def test_synthetic_lengths_are_exact_with_a_tokenizer() -> None:
    def count(words: list[str]) -> list[int]:  # a tokenizer where every word costs len(word) // 4 + 1 tokens
        return [len(w) // 4 + 1 for w in words]

    spec = TokenLengths(distribution="lognormal", mean=64, std=16, min=8, max=200)
    synth = SyntheticTexts(spec, WORDS, (count, 2))
    import random

    rng_a, rng_b = random.Random(5), random.Random(5)
    for _ in range(200):
        text = synth.text(rng_a)
        wanted = synth.length(rng_b)
        rng_b.randrange(len(WORDS))  # the cut's start, drawn after the length
        assert sum(count(text.split())) + 2 == wanted


def test_lognormal_lengths_have_the_requested_mean() -> None:
    spec = TokenLengths(distribution="lognormal", mean=128, std=32, min=1, max=10_000)
    synth = SyntheticTexts(spec, WORDS, None)
    import random

    rng = random.Random(1)
    lengths = [synth.length(rng) for _ in range(5000)]
    assert abs(statistics.mean(lengths) - 128) / 128 < 0.02
    assert abs(statistics.stdev(lengths) - 32) / 32 < 0.1


def test_approximation_without_a_local_tokenizer() -> None:
    spec = TokenLengths(mean=40, tokenizer="auto")
    assert local_tokenizer(spec, {"model_path": "/not/here"}) is None
    assert approx_tokens(["word", "你好", "a你"]) == pytest.approx([1 / 0.75, 2.0, 1 + 1 / 0.75])
    with pytest.raises(ConfigError, match="not a directory"):
        local_tokenizer(TokenLengths(tokenizer="/not/here"), None)


def test_open_loop_fields_validate() -> None:
    from scenarios.models import Scenario

    ok = Scenario.model_validate(
        {
            "name": "x",
            "kind": "openloop",
            "open_loop": {"overflow": "queue"},
            "steps": [{"rate": 5, "duration_s": 4, "ramp_s": 2}],
        }
    )
    assert ok.open_loop.overflow == "queue" and ok.steps[0].ramp_s == 2
    with pytest.raises(ValueError, match="ramp_s"):
        Scenario.model_validate(
            {"name": "x", "kind": "openloop", "steps": [{"rate": 5, "duration_s": 2, "ramp_s": 2}]}
        )
    with pytest.raises(ValueError, match="closed loop"):
        Scenario.model_validate(
            {
                "name": "x",
                "kind": "ramp",
                "search": {"enabled": True},
                "steps": [{"users": 1, "duration_s": 2}],
            }
        )


def test_query_and_indexing_model_the_two_traffic_shapes() -> None:
    query = load_scenario("query", environ={})
    assert query.is_open_loop and [w.n for w in query.payload.inputs_per_request] == [1]
    indexing = load_scenario("indexing", environ={})
    assert not indexing.is_open_loop
    sizes = [w.n for w in indexing.payload.inputs_per_request]
    assert min(sizes) == 16 and max(sizes) == 64
    assert set(indexing.payload.corpora) == {"en_long", "zh_long"}
    searched = load_scenario("query", overrides={"search.enabled": "true"}, environ={})
    assert searched.search.enabled and searched.search.precision == 0.05

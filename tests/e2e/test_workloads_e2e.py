"""Realistic traffic against the reference service: the user's own dataset, and token-length targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from embedperf.schema import read_requests_table
from loadgen.cli.runner import run_scenario

N_INPUTS = 16  # texts per request: many length samples even when the host is slow
# A lognormal around 64 tokens: a request of 16 such texts takes the one-thread service well under a second
# (32 texts around 128 tokens took 2-5 s idle, so a 12 s step on a busy host could end before one answer).
TOKENS = {"distribution": "lognormal", "mean": 64, "std": 12, "min": 8, "max": 128}
DATASET = [f"Customer question {i}: how do I rotate the API key for project {i * 7}?" for i in range(40)]


def _scenario(tmp_path: Path, name: str, payload: dict[str, object], users: int, duration_s: float) -> str:
    doc = {
        "name": name,
        "kind": "ramp",
        "payload": payload,
        "steps": [{"label": f"u{users}", "users": users, "duration_s": duration_s, "warmup_s": 0}],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc), "utf-8")
    return str(path)


def test_dataset_texts_reach_the_service(reference_service: str, tmp_path: Path) -> None:
    (tmp_path / "questions.jsonl").write_text(
        "".join(json.dumps({"question": q, "id": i}) + "\n" for i, q in enumerate(DATASET)), "utf-8"
    )
    payload = {"dataset": {"path": "questions.jsonl", "field": "question"}, "repeat_fraction": 1.0}
    folder = run_scenario(
        _scenario(tmp_path, "mydata", payload, users=2, duration_s=3),
        host=reference_service,
        runs_dir=tmp_path / "runs",
        collectors=False,
        timeout_s=120,
    )
    rows = read_requests_table(folder, ["ok", "input_chars", "input_tokens"]).to_pylist()
    assert rows and all(r["ok"] for r in rows)
    assert {r["input_chars"] for r in rows} <= {len(q) for q in DATASET}
    assert len({r["input_chars"] for r in rows}) > 1


@pytest.mark.solo
def test_token_lengths_follow_the_requested_lognormal(reference_service: str, tmp_path: Path) -> None:
    payload = {"tokens": TOKENS, "inputs_per_request": [{"n": N_INPUTS, "weight": 1}]}
    folder = run_scenario(
        _scenario(tmp_path, "tokens", payload, users=2, duration_s=12),
        host=reference_service,
        runs_dir=tmp_path / "runs",
        collectors=False,
        timeout_s=180,
    )
    rows = [r for r in read_requests_table(folder, ["ok", "input_tokens", "n_inputs"]).to_pylist() if r["ok"]]
    assert len(rows) * N_INPUTS >= 48 and all(r["n_inputs"] == N_INPUTS for r in rows)
    # counted by the service's own tokenizer (usage.prompt_tokens), special tokens included
    mean = sum(r["input_tokens"] for r in rows) / (N_INPUTS * len(rows))
    assert abs(mean - TOKENS["mean"]) / TOKENS["mean"] <= 0.05, mean
    assert all(N_INPUTS * TOKENS["min"] <= r["input_tokens"] <= N_INPUTS * TOKENS["max"] for r in rows)

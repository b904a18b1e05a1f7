"""Quality-probe reference sets and the cosine of an answer to them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from embedperf.errors import ConfigError
from loadgen.traffic.payloads import PayloadSampler
from loadgen.traffic.protocols import registry
from loadgen.traffic.quality import answer_cosine, load_reference_set, write_reference_set
from scenarios.models import Payload


def test_reference_set_round_trip_and_probe_sampling(tmp_path: Path) -> None:
    vectors = np.array([[3.0, 4.0], [1.0, 0.0]])
    path = write_reference_set(tmp_path / "ref.parquet", ["a", "b"], vectors, "m")
    texts, unit = load_reference_set(str(path))
    assert texts == ["a", "b"] and np.allclose(unit, [[0.6, 0.8], [1.0, 0.0]])
    spec = Payload.model_validate({"quality_probes": {"fraction": 0.5, "reference": str(path)}})
    sampler = PayloadSampler(spec, "/e")
    probes = [p for p in (sampler.next() for _ in range(200)) if p.reference is not None]
    assert 60 < len(probes) < 140 and all(p.inputs[0] in ("a", "b") for p in probes)


def test_answer_cosine_reads_float_and_base64_answers() -> None:
    ref = np.array([0.6, 0.8])
    body = json.dumps({"data": [{"embedding": [6.0, 8.0]}]}).encode()
    assert answer_cosine(body, ref) == pytest.approx(1.0)
    b64 = base64.b64encode(np.array([8.0, -6.0], dtype=np.float32).tobytes()).decode()
    assert answer_cosine(json.dumps({"data": [{"embedding": b64}]}).encode(), ref) == pytest.approx(
        0.0, abs=1e-6
    )
    assert answer_cosine(b"not json", ref) is None
    assert answer_cosine(json.dumps({"data": [{"embedding": [1.0]}]}).encode(), ref) is None
    # another protocol's answer, read by that protocol: KServe v2's flat FP32 tensor
    output = {"name": "embedding", "shape": [1, 2], "datatype": "FP32", "data": [4.0, 3.0]}
    kserve = json.dumps({"outputs": [output]}).encode()
    assert answer_cosine(kserve, ref) is None  # not OpenAI-shaped
    assert answer_cosine(kserve, ref, registry.get("kserve-v2").dense_vectors) == pytest.approx(0.96)


def test_missing_reference_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--write-reference"):
        load_reference_set(str(tmp_path / "nope.parquet"))

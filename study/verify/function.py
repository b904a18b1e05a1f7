"""Layer 1, function and precision: the validation cases, the vectors' shape, and cosine to an fp32 reference.

The cases are the load side's (loadgen.traffic.payloads.validation_cases). The reference set is an
`embedperf precision --write-reference` file; without one, verify writes it from the fp32 model on this CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.traffic.payloads import validation_cases
from loadgen.traffic.quality import load_reference_set, write_reference_set
from modelcore.model_folder import model_dir
from study.corpus import shipped_eval_set
from study.reference_vectors import fp32_reference_vectors
from study.vectors import cosine_per_text
from study.verify.target import TargetClient, embeddings_of
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import Check, CheckStatus, LayerResult, at_least, judged

ENCODE_BATCH = 8
WORST_SHOWN = 3
TEXT_EXCERPT_CHARS = 60


def write_default_reference(path: Path, model_path: Path | None = None) -> Path:
    """The shipped corpus embedded by the fp32 reference model on the CPU, as a reference set at `path`."""
    texts = [t.text for t in shipped_eval_set().texts]

    def compute() -> np.ndarray:
        # torch loads only when the vectors are not cached yet: verify against a remote target needs none
        from modelcore.model import load_model

        return load_model(model_path, device="cpu", precision="fp32").encode(texts)

    vectors = fp32_reference_vectors(model_dir(model_path), texts, compute)
    name = str(model_path) if model_path else "default model"
    return write_reference_set(path, texts, vectors, f"{name} fp32 (embedperf verify)")


def _vector_checks(vectors: list[list[float]]) -> tuple[int | None, bool]:
    """(common dimension or None when they differ, whether every value is finite and no vector is zero)."""
    dims = {len(v) for v in vectors}
    array = np.asarray(vectors, dtype=np.float64) if len(dims) == 1 else None
    finite = array is not None and bool(
        np.isfinite(array).all() and (np.linalg.norm(array, axis=1) > 0).all()
    )
    return (dims.pop() if len(dims) == 1 else None), finite


def validation_checks(client: TargetClient) -> tuple[list[Check], list[list[float]]]:
    """One check per validation case, and the vectors the accepted ones returned."""
    checks: list[Check] = []
    vectors: list[list[float]] = []
    for case in validation_cases():
        answer = client.embed(case.inputs)
        refused = 400 <= answer.status < 500
        got = embeddings_of(answer) if answer.ok else None
        status: CheckStatus = "fail"
        measured, limit, note = answer.describe(), "HTTP 200", ""
        if case.expect_failure:
            status, limit = "pass" if refused else "fail", "a 4xx refusal"
            note = "" if refused else "an empty input must be refused as the client's error"
        elif got is not None and len(got) == len(case.inputs):
            vectors += got
            status, measured, limit = "pass", f"HTTP 200, {len(got[0])} dims", ""
        elif answer.ok:
            measured, limit = "HTTP 200 without one embedding per input", ""
        elif refused and case.input_chars > 1000:
            status, limit = "warn", ""
            note = "the target refuses long texts: clients must split them (a truncating target answers 200)"
        name = f"{case.endpoint.split(':', 1)[-1]} ({case.input_chars:,} characters)"
        checks.append(Check(name=name, status=status, measured=measured, limit=limit, note=note))
    return checks, vectors


def precision_checks(
    cosines: np.ndarray, texts: list[str], thresholds: VerifyThresholds
) -> tuple[list[Check], dict[str, str]]:
    """Mean cosine against the gate and the strict bar; P5, min and the worst texts as evidence."""
    mean = float(cosines.mean())
    measured = f"{mean:.6f} over {len(cosines)} texts"
    gate = at_least("mean cosine to fp32", mean, thresholds.min_cosine, measured)
    strict = at_least(
        "strict-use cosine", mean, thresholds.strict_cosine, f"{mean:.6f}", under=thresholds.strict_action
    )
    if strict.status != "pass":
        strict.note = "fine for general use, not for retrieval that must not move"
    worst = np.argsort(cosines)[:WORST_SHOWN]
    evidence = {
        "cosine P5 / min": f"{np.percentile(cosines, 5):.6f} / {cosines.min():.6f}",
        "worst texts": "; ".join(f"{cosines[i]:.4f} {texts[i][:TEXT_EXCERPT_CHARS]!r}" for i in worst),
    }
    return ([gate] if gate.status == "fail" else [gate, strict]), evidence


def run_function_layer(
    client: TargetClient, thresholds: VerifyThresholds, reference: Path, info_dimension: int | None
) -> LayerResult:
    """Layer 1 against the target: validation cases, shape and finiteness, precision against `reference`."""
    checks, vectors = validation_checks(client)
    texts, ref_vectors = load_reference_set(str(reference))
    candidate = client.encode(texts, ENCODE_BATCH)
    vectors += candidate.tolist()
    dimension, finite = _vector_checks(vectors)
    expected = thresholds.dimension or info_dimension or int(ref_vectors.shape[1])
    source = "--dimension" if thresholds.dimension else "/info" if info_dimension else "the reference set"
    checks += [
        Check(
            name="dimension",
            status="pass" if dimension == expected else "fail",
            measured=f"{dimension}" if dimension is not None else "vectors of different sizes",
            limit=f"{expected} ({source})",
        ),
        Check(
            name="finite, non-zero vectors",
            status="pass" if finite else "fail",
            measured=f"{len(vectors)} vectors {'all finite' if finite else 'with NaN, inf or all-zero rows'}",
        ),
    ]
    evidence = {"reference set": str(reference)}
    if candidate.shape[1] == ref_vectors.shape[1]:
        more, figures = precision_checks(cosine_per_text(ref_vectors, candidate), texts, thresholds)
        checks += more
        evidence.update(figures)
    else:
        checks.append(
            Check(
                name="mean cosine to fp32",
                status="fail",
                measured=f"not comparable: the target returns {candidate.shape[1]} dims, the reference "
                f"{ref_vectors.shape[1]}",
                note="pass --reference written from this model (embedperf precision --write-reference)",
            )
        )
    return judged(1, checks, evidence)

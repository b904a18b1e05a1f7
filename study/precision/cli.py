"""`embedperf precision`: compare a configuration's embeddings with fp32 and gate on cosine, domains and neighbours."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from embedperf.errors import ConfigError, GateFailed, problems
from embedperf.options import add_shared_option
from embedperf.schema import open_run_folder
from loadgen.traffic.quality import write_reference_set
from modelcore.model import EmbeddingModel, load_model
from modelcore.model_folder import model_dir
from study.corpus import EvalSet, load_dataset, shipped_eval_set
from study.options import study_parser
from study.precision.advice import advise
from study.precision.advice_plan import Advice, VariantCheck, probe_indexes
from study.precision.compare import EndpointEncoder, PrecisionResult, compare_embeddings, write_result
from study.precision.domains import domain_groups
from study.precision.gate import PROFILE_DEFAULTS, TOP_K, PrecisionGates
from study.precision.layers import compare_layers
from study.precision.text import format_advice, format_layers, format_result
from study.reference_vectors import fp32_reference_vectors
from study.vectors import Encoder

EPILOG = """\
examples:
  embedperf precision --precision int8                 # int8 MiniLM vs fp32 MiniLM, on the CPU
  embedperf precision --precision int8 --layers        # ... and where, layer by layer, it leaves fp32
  embedperf precision --precision int8 --layers linear --report int8.html
  embedperf precision --precision int8 --advise        # which Linear layers to keep in fp32, and the speed
  embedperf precision --precision int8 --int8-exclude 'output\\.dense|intermediate'   # attention-only int8
  embedperf precision --precision bf16 --profile strict
  embedperf precision --precision int8 --dataset texts.jsonl --field text --label-field domain
  embedperf precision --candidate-model /models/bge-m3-pruned --model /models/bge-m3
  embedperf precision --endpoint http://127.0.0.1:8086 --endpoint-model all-MiniLM-L6-v2

The reference is always the fp32 build of --model on the CPU. The gate (standard / strict): mean
cosine >= 0.99 / 0.999; every language, length band and label value with mean and P5 cosine >=
0.98 / 0.998 (--min-domain-cosine); each query's top-10 neighbours the same as fp32's on average
>= 0.95 / 0.98 (--min-topk-agreement). Exit code 0 when the gate passes, 1 when it fails, 2 on a
usage error. With --advise: 0 when an int8 variant passes (its expression is printed), 1 when none does.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = study_parser(
        "embedperf precision",
        "Check a configuration's embeddings against an fp32 reference on the shipped evaluation corpus "
        "(Chinese and English, queries and passages, four domains) or your own set: cosine per text, per "
        "domain and top-10 retrieval agreement; where the layers lose precision; which Linear layers int8 "
        "should keep in fp32.",
        EPILOG,
    )
    parser.add_argument("--model", type=Path, help="model directory (default: packaged all-MiniLM-L6-v2)")
    cand = parser.add_argument_group("candidate (pick one; default --precision fp32)")
    cand.add_argument(
        "--precision", choices=["fp32", "fp16", "bf16", "int8"], help="the same model at this precision"
    )
    cand.add_argument(
        "--device", default="cpu", help="device of the candidate: cpu, cuda[:N], npu[:N] (default cpu)"
    )
    cand.add_argument(
        "--int8-exclude",
        default="",
        help="with --precision int8: regex of Linear layers kept in fp32, e.g. 'output\\.dense|intermediate'",
    )
    cand.add_argument("--candidate-model", type=Path, help="another model build (a directory)")
    cand.add_argument("--endpoint", help="a running OpenAI-compatible base URL, e.g. http://127.0.0.1:8086")
    cand.add_argument("--endpoint-model", default="all-MiniLM-L6-v2", help="model name sent to --endpoint")
    cand.add_argument(
        "--api-key-env",
        default="EMBEDPERF_TARGET_API_KEY",
        help="environment variable holding the endpoint's API key (default %(default)s)",
    )
    data = parser.add_argument_group("evaluation set (default: the shipped corpus)")
    data.add_argument("--dataset", type=Path, help="your own texts: JSONL, one object per line")
    data.add_argument("--field", default="text", help="the key holding the text (default %(default)s)")
    data.add_argument(
        "--label-field",
        action="append",
        default=[],
        metavar="NAME",
        help="a key to break agreement down by (repeatable), e.g. domain",
    )
    gate = parser.add_argument_group("gate")
    gate.add_argument(
        "--profile",
        choices=sorted(PROFILE_DEFAULTS),
        default="standard",
        help="standard: mean cosine >= 0.99; strict: >= 0.999 (and the domain / agreement defaults)",
    )
    gate.add_argument(
        "--min-domain-cosine", type=float, help="each domain's mean and P5 cosine (0.98 / 0.998)"
    )
    gate.add_argument("--min-topk-agreement", type=float, help=f"mean agreement@{TOP_K} (0.95 / 0.98)")
    study = parser.add_argument_group("where precision is lost")
    study.add_argument(
        "--layers",
        nargs="?",
        const="layers",
        choices=["layers", "linear"],
        help="compare hidden states layer by layer; '--layers linear' also every Linear inside each layer",
    )
    study.add_argument(
        "--advise",
        action="store_true",
        help="with --precision int8: find the fewest Linear layers to keep in fp32 so the gate passes",
    )
    study.add_argument(
        "--speed-rounds", type=int, default=3, help="with --advise: interleaved encode rounds (default 3)"
    )
    out = parser.add_argument_group("output")
    out.add_argument("--threads", type=int, help="torch threads for local models")
    out.add_argument("--out", type=Path, help="also write the result as JSON here")
    out.add_argument("--report", type=Path, help="also write the precision report (HTML) here")
    add_shared_option(out, "lang", "en")
    out.add_argument(
        "--write-reference",
        type=Path,
        metavar="PATH",
        help="also store the texts and their fp32 embeddings as a quality-probe reference set "
        "(Parquet) for a scenario's payload.quality_probes.reference",
    )
    out.add_argument(
        "--run",
        type=Path,
        metavar="RUN_DIR",
        help="store the result in RUN_DIR/precision.json so the run's report shows it",
    )
    return parser


def _check_usage(args: argparse.Namespace) -> PrecisionGates:
    """Every combination that cannot work is refused before a model loads; returns the gate."""
    if args.candidate_model is not None and args.endpoint:
        raise ConfigError("pass one of --candidate-model or --endpoint, not both")
    if args.endpoint and args.precision:
        raise ConfigError("--precision applies to local models; the endpoint's precision is its own")
    if args.layers and args.endpoint:
        raise ConfigError(
            "--layers needs the candidate's layers: pass --precision or --candidate-model, not --endpoint"
        )
    if args.advise:
        if args.precision != "int8" or args.candidate_model is not None or args.endpoint:
            raise ConfigError(
                "--advise chooses the layers int8 keeps in fp32: use it with --precision int8 alone"
            )
        if args.int8_exclude:
            raise ConfigError("--advise finds the --int8-exclude expression itself; drop --int8-exclude")
        if args.device != "cpu":
            raise ConfigError("--advise needs --device cpu: dynamic int8 runs on the CPU only")
        if args.speed_rounds < 1:
            raise ConfigError("--speed-rounds must be at least 1: the advice reports measured speed")
    if args.label_field and args.dataset is None:
        raise ConfigError("--label-field names a key of --dataset; pass --dataset texts.jsonl too")
    try:
        return PrecisionGates.for_profile(args.profile, args.min_domain_cosine, args.min_topk_agreement)
    except ValidationError as exc:
        raise ConfigError(f"invalid gate: {problems(exc)} (thresholds lie in (0, 1])") from exc


def _candidate(args: argparse.Namespace) -> tuple[str, Encoder]:
    if args.endpoint:
        endpoint = EndpointEncoder(args.endpoint, args.endpoint_model, args.api_key_env)
        return f"endpoint {args.endpoint}", endpoint
    precision = args.precision or "fp32"
    path = args.candidate_model or args.model
    name = f"{path.name if path else 'default model'} {precision} on {args.device}"
    if precision == "int8" and args.int8_exclude:
        name += f" (fp32 kept for /{args.int8_exclude}/)"
    return name, load_model(
        path, device=args.device, precision=precision, threads=args.threads, int8_exclude=args.int8_exclude
    )


def _check_args(args: argparse.Namespace) -> str:
    """The options a verification run must repeat to judge the same thing."""
    parts: list[str] = []
    for flag, value in (
        ("--model", args.model),
        ("--dataset", args.dataset),
        ("--min-domain-cosine", args.min_domain_cosine),
        ("--min-topk-agreement", args.min_topk_agreement),
    ):
        if value is not None:
            parts += [flag, str(value)]
    if args.dataset is not None and args.field != "text":
        parts += ["--field", args.field]
    for label in args.label_field:
        parts += ["--label-field", label]
    if args.profile != "standard":
        parts += ["--profile", args.profile]
    return shlex.join(parts)


def run_precision(args: argparse.Namespace, gates: PrecisionGates) -> PrecisionResult:
    evalset = (
        load_dataset(args.dataset, args.field, tuple(args.label_field))
        if args.dataset
        else shipped_eval_set()
    )
    texts = [t.text for t in evalset.texts]
    # The candidate first: a setting it refuses (an exclusion matching every layer, a missing device)
    # fails before the reference has been computed.
    name, candidate = _candidate(args)
    reference = load_model(args.model, device="cpu", precision="fp32", threads=args.threads)
    token_counts = [len(ids) for ids in reference.tokenize(texts)]
    ref_vectors = fp32_reference_vectors(model_dir(args.model), texts, lambda: reference.encode(texts))
    if args.write_reference is not None:
        model_name = str(args.model) if args.model else "default model"
        print(f"reference set: {write_reference_set(args.write_reference, texts, ref_vectors, model_name)}")

    def evaluate(vectors: np.ndarray, candidate_name: str = name) -> PrecisionResult:
        return compare_embeddings(
            ref_vectors,
            vectors,
            evalset.texts,
            candidate_name=candidate_name,
            gates=gates,
            label_fields=evalset.label_fields,
            token_counts=token_counts,
            dataset=evalset.source,
        )

    result = evaluate(candidate.encode(texts))
    if args.layers and isinstance(candidate, EmbeddingModel):
        result.layers = compare_layers(
            reference, candidate, texts, gates.min_mean_cosine, with_linear=args.layers == "linear"
        )
    if args.advise and isinstance(candidate, EmbeddingModel):
        result.advice = _advise(args, reference, candidate, ref_vectors, evalset, evaluate)
    return result


def _advise(
    args: argparse.Namespace,
    reference: EmbeddingModel,
    int8: EmbeddingModel,
    ref_vectors: np.ndarray,
    evalset: EvalSet,
    evaluate: Callable[[np.ndarray, str], PrecisionResult],
) -> Advice:
    axes = domain_groups(evalset.texts, None, evalset.label_fields)
    probe = probe_indexes(["/".join(values) for values in zip(*axes.values(), strict=True)])

    def check(vectors: np.ndarray, kept: int) -> VariantCheck:
        result = evaluate(vectors, f"int8 keeping {kept} Linear layers in fp32")
        return VariantCheck(
            kept_fp32=kept, **result.model_dump(include=set(VariantCheck.model_fields) - {"kept_fp32"})
        )

    def load_variant(expression: str) -> EmbeddingModel:
        return load_model(
            args.model, device="cpu", precision="int8", threads=args.threads, int8_exclude=expression
        )

    texts = [t.text for t in evalset.texts]
    return advise(reference, int8, texts, ref_vectors, probe, check, load_variant, args.speed_rounds, print)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    gates = _check_usage(args)
    result = run_precision(args, gates)
    print(format_result(result))
    if result.layers is not None:
        print(format_layers(result.layers))
    if result.advice is not None:
        print(format_advice(result.advice, _check_args(args)))
    if args.out:
        print(f"result: {write_result(result, args.out)}")
    if args.run:
        folder = open_run_folder(args.run)
        path = write_result(result, folder.precision)
        print(f"result: {path} (rebuild the report with: embedperf report {folder.root})")
    if args.report:
        from study.precision.report import write_precision_report  # matplotlib loads only for --report

        print(f"report: {write_precision_report(result, args.report, args.lang)}")
    if result.advice is not None:
        verified = result.advice.verified
        if verified is None or not verified.passed:
            raise GateFailed(
                "no int8 variant passes the precision gate on this model: keep it in fp32 or use bf16"
            )
        return 0
    if not result.passed:
        raise GateFailed(
            "; ".join(result.failures) + ": this configuration changes the embeddings too much to deploy"
        )
    return 0

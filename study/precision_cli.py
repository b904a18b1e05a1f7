"""`embedperf precision`: compare a configuration's embeddings with fp32 and gate on mean cosine."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from embedperf.errors import ConfigError, GateFailed
from embedperf.schema import open_run_folder
from study.corpus import load_eval_corpus
from study.precision import (
    GATE_MIN_MEAN_COSINE,
    Encoder,
    EndpointEncoder,
    PrecisionResult,
    compare_embeddings,
    write_result,
)

EPILOG = """\
examples:
  embedperf precision --precision int8                 # int8 MiniLM vs fp32 MiniLM, on the CPU
  embedperf precision --precision int8 --int8-exclude 'output\\.dense|intermediate'   # attention-only int8
  embedperf precision --precision bf16 --profile strict
  embedperf precision --candidate-model /models/bge-m3-pruned --model /models/bge-m3
  embedperf precision --endpoint http://127.0.0.1:8086 --endpoint-model all-MiniLM-L6-v2

The reference is always the fp32 build of --model on the CPU. Exit code 0 when the gate passes,
1 when it fails (mean cosine below 0.99, or 0.999 with --profile strict), 2 on a usage error.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf precision",
        description="Check a configuration's embeddings against an fp32 reference on the shipped "
        "evaluation corpus (Chinese, English, mixed; short to long texts): cosine per text "
        "(mean, min, P1) and top-10 retrieval agreement.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model", type=Path, default=None, help="model directory (default: packaged all-MiniLM-L6-v2)"
    )
    cand = parser.add_argument_group("candidate (pick one; default --precision fp32)")
    cand.add_argument(
        "--precision",
        choices=["fp32", "fp16", "bf16", "int8"],
        default=None,
        help="the same model at this precision",
    )
    cand.add_argument(
        "--device", default="cpu", help="device of the candidate: cpu, cuda[:N], npu[:N] (default cpu)"
    )
    cand.add_argument(
        "--int8-exclude",
        default="",
        help="with --precision int8: regex of Linear layers kept in fp32, e.g. 'output\\.dense|intermediate'",
    )
    cand.add_argument("--candidate-model", type=Path, default=None, help="another model build (a directory)")
    cand.add_argument(
        "--endpoint", default=None, help="a running OpenAI-compatible base URL, e.g. http://127.0.0.1:8086"
    )
    cand.add_argument("--endpoint-model", default="all-MiniLM-L6-v2", help="model name sent to --endpoint")
    cand.add_argument(
        "--api-key-env",
        default="EMBEDPERF_TARGET_API_KEY",
        help="environment variable holding the endpoint's API key (default %(default)s)",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(GATE_MIN_MEAN_COSINE),
        default="standard",
        help="gate: standard = mean cosine >= 0.99, strict = >= 0.999",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads for local models")
    parser.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    parser.add_argument(
        "--write-reference",
        type=Path,
        default=None,
        metavar="PATH",
        help="also store the corpus texts and their fp32 embeddings as a quality-probe reference set "
        "(Parquet) for a scenario's payload.quality_probes.reference",
    )
    parser.add_argument(
        "--run",
        type=Path,
        default=None,
        metavar="RUN_DIR",
        help="store the result in RUN_DIR/precision.json so the run's report shows it",
    )
    return parser


def _candidate(args: argparse.Namespace) -> tuple[str, Encoder]:
    from service.model import load_model

    chosen = [x for x in (args.candidate_model, args.endpoint) if x is not None]
    if len(chosen) > 1:
        raise ConfigError("pass one of --candidate-model or --endpoint, not both")
    if args.endpoint:
        if args.precision:
            raise ConfigError("--precision applies to local models; the endpoint's precision is its own")
        return f"endpoint {args.endpoint}", EndpointEncoder(
            args.endpoint, args.endpoint_model, os.environ.get(args.api_key_env)
        )
    precision = args.precision or "fp32"
    path = args.candidate_model or args.model
    name = f"{path.name if path else 'default model'} {precision} on {args.device}"
    if precision == "int8" and args.int8_exclude:
        name += f" (fp32 kept for /{args.int8_exclude}/)"
    model = load_model(
        path, device=args.device, precision=precision, threads=args.threads, int8_exclude=args.int8_exclude
    )
    return name, model


def run_precision(args: argparse.Namespace) -> PrecisionResult:
    from service.model import load_model

    corpus = load_eval_corpus()
    texts = [t.text for t in corpus]
    name, candidate = _candidate(args)
    reference = load_model(args.model, device="cpu", precision="fp32", threads=args.threads)
    ref_vectors = reference.encode(texts)
    if args.write_reference is not None:
        from loadgen.quality import write_reference_set

        model_name = str(args.model) if args.model else "default model"
        print(f"reference set: {write_reference_set(args.write_reference, texts, ref_vectors, model_name)}")
    cand_vectors = candidate.encode(texts)
    return compare_embeddings(
        ref_vectors,
        cand_vectors,
        [t.id for t in corpus],
        [f"{t.lang}/{t.length}" for t in corpus],
        candidate_name=name,
        profile=args.profile,
    )


def format_result(result: PrecisionResult) -> str:
    verdict = "PASS" if result.passed else "FAIL"
    lines = [
        f"candidate : {result.candidate}",
        f"reference : {result.reference} ({result.n_texts} texts, shipped evaluation corpus)",
        f"cosine    : mean {result.cosine_mean:.6f}  min {result.cosine_min:.6f}  P1 {result.cosine_p1:.6f}",
        f"top-{result.topk} agreement: mean {result.topk_agreement_mean:.3f}  min {result.topk_agreement_min:.3f}",
        "by group  : " + "  ".join(f"{g} {v['cosine_mean']:.5f}" for g, v in result.by_group.items()),
        f"gate      : mean cosine >= {result.gate_min_mean_cosine} ({result.profile}) -> {verdict}",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    result = run_precision(args)
    print(format_result(result))
    if args.out:
        write_result(result, args.out)
        print(f"result: {args.out}")
    if args.run:
        folder = open_run_folder(args.run)
        write_result(result, folder.precision)
        print(f"result: {folder.precision} (rebuild the report with: embedperf report {folder.root})")
    if not result.passed:
        raise GateFailed(
            f"mean cosine {result.cosine_mean:.6f} is below {result.gate_min_mean_cosine}: "
            "this configuration changes the embeddings too much to deploy"
        )
    return 0

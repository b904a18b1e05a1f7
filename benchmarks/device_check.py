"""`make device-check`: does the reference service turn an accelerator's compute into throughput?

On a host with a GPU (or NPU) and the project installed, offline: builds a model of BGE-M3's architecture
(XLM-RoBERTa large: 24 layers, 1024 hidden, 568M parameters) with random weights from a config, measures the
model code's own ceiling (inputs/s per batch size on length-sorted batches of the ramp's texts, no HTTP, no
queue), then runs the quick ramp against `embedperf serve` at fp16 and fp32 with device graphs on and off,
and prints one table: goodput and P99 per step, device utilisation and power at u100, and u100's goodput as a
share of the ceiling. `--tiny --device cpu` runs the same path with a two-layer model, as a dry run anywhere.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen.processes.service_proc import ServiceProcess
from modelcore.model import load_model
from modelcore.model_folder import default_model_path

REPO_ROOT = Path(__file__).resolve().parents[1]
RAMP_CORPORA = [
    REPO_ROOT / "scenarios" / "corpora" / f"{name}.txt"
    for name in ("en_short", "en_medium", "zh_short", "zh_medium")
]
MODEL_NAME = "bge-m3-random"
CEILING_BATCHES = (32, 64, 128, 256)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def build_model(folder: Path, tiny: bool) -> Path:
    """A BGE-M3-shaped encoder with random weights (CLS pooling), with MiniLM's tokeniser (ids fit its vocab)."""
    from transformers import XLMRobertaConfig, XLMRobertaModel

    hidden, layers, heads, intermediate = (64, 2, 4, 128) if tiny else (1024, 24, 16, 4096)
    config = XLMRobertaConfig(
        vocab_size=250002,
        max_position_embeddings=8194,
        type_vocab_size=1,
        pad_token_id=0,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
    )
    XLMRobertaModel(config).save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (default_model_path() / name).is_file():
            shutil.copy(default_model_path() / name, folder / name)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512}))
    return folder


def ramp_texts(limit: int = 2048) -> list[str]:
    texts: list[str] = []
    for file in RAMP_CORPORA:
        texts += [line.strip() for line in file.read_text().splitlines() if line.strip()]
    return (texts * (1 + limit // max(1, len(texts))))[:limit]


def ceiling(folder: Path, device: str, precision: str) -> dict[int, float]:
    """Inputs/s of the model code alone per batch size, length-sorted batches, after a warm-up pass."""
    model = load_model(folder, device, precision)
    ids = sorted(model.tokenize(ramp_texts()), key=len)
    rates = {}
    for size in CEILING_BATCHES:
        batches = [ids[i : i + size] for i in range(0, len(ids), size)]
        model.embed_token_ids(batches[0])
        t_start_s = time.perf_counter()
        for batch in batches:
            model.embed_token_ids(batch)
        rates[size] = len(ids) / (time.perf_counter() - t_start_s)
    del model
    return rates


def ramp(
    folder: Path, device: str, precision: str, graphs: str, args: argparse.Namespace, out: Path
) -> list[dict[str, str]]:
    name = f"{precision}-graphs-{graphs}"
    flags = ["--model", str(folder), "--device", device, "--precision", precision, "--graphs", graphs,
             "--max-batch-size", "128", "--max-batch-tokens", "32768", "--deadline-ms", "30000",
             "--admit-wait-share", "1.0", "--log-level", "warning", "--access-log", "off"]  # fmt: skip
    with ServiceProcess(flags, log_path=out / f"{name}.log", ready_timeout_s=600) as service:
        result = subprocess.run(
            [sys.executable, "-m", "embedperf.cli", "run", "ramp", "--host", service.url, "--profile", "quick",
             "--step-duration-s", str(args.step_s), "--warmup-s", "2", "--workers", str(args.workers),
             "--runs-dir", str(out / "runs"), "--label", name, "--set", f"target.model={MODEL_NAME}"],
            capture_output=True, text=True, cwd=REPO_ROOT,
        )  # fmt: skip
    folder_line = [line for line in result.stdout.splitlines() if line.startswith("run folder: ")]
    if not folder_line:
        print(
            f"{name}: the ramp did not finish ({result.returncode}): {result.stderr[-800:]}", file=sys.stderr
        )
        return []
    run_folder = Path(folder_line[-1].removeprefix("run folder: "))
    subprocess.run(
        [sys.executable, "-m", "embedperf.cli", "report", str(run_folder)], capture_output=True, cwd=REPO_ROOT
    )
    steps = run_folder / "analysis" / "steps.csv"
    with steps.open() as handle:
        return list(csv.DictReader(handle))


def number(row: dict[str, str], key: str, digits: int = 0) -> str:
    value = row.get(key) or ""
    return f"{float(value):,.{digits}f}" if value not in ("", "None") else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--device", default="cuda", help="cuda, cuda:N, npu:N (cpu with --tiny for a dry run)"
    )
    parser.add_argument("--tiny", action="store_true", help="a two-layer model: the same path, in seconds")
    parser.add_argument("--step-s", type=int, default=12, help="seconds per ramp step")
    parser.add_argument("--workers", type=int, default=4, help="Locust worker processes of the generator")
    parser.add_argument("--precisions", nargs="+", default=["fp16", "fp32"])
    parser.add_argument("--graphs", nargs="+", default=["on", "off"])
    args = parser.parse_args(argv)
    graphs = ["off"] if args.device == "cpu" else args.graphs
    with tempfile.TemporaryDirectory(prefix="embedperf-device-check-") as tmp:
        out = Path(tmp)
        t_start_s = time.monotonic()
        folder = build_model(out / MODEL_NAME, args.tiny)
        print(f"model: XLM-RoBERTa {'tiny' if args.tiny else 'large'} (random weights) built in "
              f"{time.monotonic() - t_start_s:.0f} s", flush=True)  # fmt: skip
        rows = []
        for precision in args.precisions:
            rates = ceiling(folder, args.device, precision)
            print(f"ceiling {precision}: " + ", ".join(f"batch {b}: {r:,.0f} inputs/s" for b, r in rates.items()),
                  flush=True)  # fmt: skip
            for mode in graphs:
                steps = ramp(folder, args.device, precision, mode, args, out)
                rows.append((precision, mode, steps, max(rates.values()), rates.get(128, 0.0)))
        print()
        print("| precision | graphs | u1 | u10 | u50 | u100 (P99 ms) | device util at u100 | power at u100 "
              "| u100 / ceiling at batch 128 |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|")
        for precision, mode, steps, _, ceiling_128 in rows:
            if not steps:
                print(f"| {precision} | {mode} | did not finish | | | | | | |")
                continue
            last = steps[-1]
            cells = [number(step, "goodput_qps") for step in steps[:-1]]
            share = float(last["goodput_qps"] or 0) / ceiling_128 if ceiling_128 else 0.0
            print(f"| {precision} | {mode} | " + " | ".join(cells) + f" | {number(last, 'goodput_qps')} "
                  f"({number(last, 'p99_ms', 1)}) | {number(last, 'device_util_mean_pct')} % | "
                  f"{number(last, 'power_mean_w')} W | {share:.0%} |")  # fmt: skip
        print(f"\nwall time {time.monotonic() - t_start_s:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

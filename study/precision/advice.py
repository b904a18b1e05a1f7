"""Which Linear layers to keep in fp32 so that int8 passes the gate: sensitivity scan, then the fewest kept.

The most sensitive Linears (each quantised alone) are kept first; the number kept is bisected against the
whole gate, assuming more kept never hurts (int8 errors of different layers add up). The fp32 network
borrows the modules of the service's own int8 build, so the scan needs one model load per precision; the
advised expression is then loaded as `--int8-exclude` would load it, and verified.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import torch

from modelcore.model import EmbeddingModel, int8_targets
from study.precision.advice_plan import (
    ATTENTION_ONLY_EXCLUDE,
    Advice,
    LayerSensitivity,
    VariantCheck,
    exclusion_regex,
    fewest_kept,
    measure_speed,
    method_text,
)
from study.vectors import cosine_per_text


@contextmanager
def swapped(network: torch.nn.Module, replacements: Mapping[str, torch.nn.Module]) -> Iterator[None]:
    """The network with the named submodules replaced for the duration of the block, then restored."""
    originals: dict[str, torch.nn.Module] = {}
    try:
        for name, module in replacements.items():
            parent_name, _, child = name.rpartition(".")
            parent = network.get_submodule(parent_name)
            originals[name] = parent.get_submodule(child)
            setattr(parent, child, module)
        yield
    finally:
        for name, module in originals.items():
            parent_name, _, child = name.rpartition(".")
            setattr(network.get_submodule(parent_name), child, module)


def quantised_linears(fp32: EmbeddingModel, int8: EmbeddingModel) -> dict[str, torch.nn.Module]:
    """Every Linear the service quantises, as the int8 build holds it, by name (network order)."""
    names = int8_targets(fp32.network, "")
    return {
        name: int8.network.get_submodule(name) for name, _ in fp32.network.named_modules() if name in names
    }


def scan_sensitivity(
    fp32: EmbeddingModel,
    linears: Mapping[str, torch.nn.Module],
    probe_texts: list[str],
    probe_reference: np.ndarray,
    log: Callable[[str], None],
) -> list[LayerSensitivity]:
    """Each Linear quantised alone; most sensitive first (ties by name)."""
    out = []
    for n, (name, module) in enumerate(linears.items(), 1):
        with swapped(fp32.network, {name: module}):
            vectors = fp32.encode(probe_texts)
        drop = 1.0 - float(cosine_per_text(probe_reference, vectors).mean())
        log(f"sensitivity {n}/{len(linears)}: {name} alone in int8 costs {drop:.6f} cosine")
        out.append(LayerSensitivity(name=name, cosine_drop=drop))
    return sorted(out, key=lambda s: (-s.cosine_drop, s.name))


def advise(
    fp32: EmbeddingModel,
    int8: EmbeddingModel,
    texts: list[str],
    reference: np.ndarray,
    probe: list[int],
    evaluate: Callable[[np.ndarray, int], VariantCheck],
    load_variant: Callable[[str], EmbeddingModel],
    speed_rounds: int,
    log: Callable[[str], None],
) -> Advice:
    """Scan, fewest kept, the expression loaded and verified, the speeds; evaluate(vectors, kept) applies the
    whole gate to the whole set."""
    linears = quantised_linears(fp32, int8)
    names = list(linears)
    sensitivities = scan_sensitivity(fp32, linears, [texts[i] for i in probe], reference[probe], log)
    order = [s.name for s in sensitivities]

    def check(m: int) -> VariantCheck:
        kept = set(order[:m])
        with swapped(fp32.network, {name: linears[name] for name in names if name not in kept}):
            result = evaluate(fp32.encode(texts), m)
        log(f"keeping {m} in fp32: cosine {result.cosine_mean:.6f}, {'pass' if result.passed else 'fail'}")
        return result

    passing, one_fewer = fewest_kept(len(names), check)
    attention_only = len(names) - len(int8_targets(fp32.network, ATTENTION_ONLY_EXCLUDE))
    expression, kept, verified, speeds, method = None, list(order), None, [], ""
    if passing is not None:
        kept = [name for name in names if name in set(order[: passing.kept_fp32])]
        expression = exclusion_regex(kept, names) if kept else ""
        variant = load_variant(expression)
        verified = evaluate(variant.encode(texts), len(kept))
        log(f"speed: fp32, int8 and the advised variant, {speed_rounds} interleaved round(s)")
        speeds = measure_speed({"fp32": fp32, "int8": int8, "advised": variant}, texts, speed_rounds)
        method = method_text(len(texts), speed_rounds)
    return Advice(
        expression=expression,
        kept_fp32=kept,
        n_linear=len(names),
        verified=verified,
        one_fewer=one_fewer if passing is None or one_fewer.kept_fp32 < passing.kept_fp32 else None,
        attention_only_expression=ATTENTION_ONLY_EXCLUDE,
        attention_only_kept=attention_only,
        n_texts=len(texts),
        probe_texts=len(probe),
        sensitivities=sensitivities,
        speed=speeds,
        speed_method=method,
    )

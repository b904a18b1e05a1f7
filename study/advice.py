"""Which Linear layers to keep in fp32 so that int8 passes the gate: sensitivity scan, then the fewest kept.

Each Linear is quantised alone and the cosine it costs is measured; the most sensitive are kept in
fp32 first. The number kept is bisected on the whole evaluation set against the whole gate, assuming
that keeping more layers never hurts (it holds closely: int8 errors of different layers add up).

The variants are built by swapping modules: the fp32 network borrows the quantised Linear modules of
the service's own int8 build (the same per-channel dynamic quantisation, module for module), so the
scan needs one model load per precision, not one per layer. The advised expression is then loaded
through the service's loader with `int8_exclude`, exactly as `--int8-exclude` would, and verified.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from pydantic import BaseModel

from service.model import EmbeddingModel, int8_targets
from study.encode_speed import SpeedFigure, measure_speed, method_text
from study.vectors import cosine_per_text

# The hand-written exclusion the advice is measured against: every projection after attention in fp32.
ATTENTION_ONLY_EXCLUDE = r"output\.dense|intermediate"
ADVICE_PROBE_TEXTS = 36
_INDEXED = re.compile(r"^(?P<prefix>.*?\.)(?P<index>\d+)(?P<suffix>\..+)?$")


class LayerSensitivity(BaseModel):
    name: str
    cosine_drop: float  # 1 - mean cosine to fp32 with this Linear alone in int8 (probe texts)


class VariantCheck(BaseModel):
    """One int8 variant against the whole gate on the whole evaluation set."""

    kept_fp32: int
    cosine_mean: float
    topk: int
    topk_agreement_mean: float
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


class Advice(BaseModel):
    expression: str | None  # the --int8-exclude value; None when no int8 variant passes
    kept_fp32: list[str]
    n_linear: int
    verified: VariantCheck | None  # the advised variant as the service loads it
    one_fewer: VariantCheck | None  # the same order with one layer fewer kept: why not fewer
    attention_only_expression: str
    attention_only_kept: int
    n_texts: int
    probe_texts: int
    sensitivities: list[LayerSensitivity]
    speed: list[SpeedFigure]
    speed_method: str


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


def exclusion_regex(kept: Sequence[str], all_names: Sequence[str]) -> str:
    """An anchored expression matching exactly the kept names (layer indexes folded per role), checked
    against every Linear name so that it cannot keep more or fewer than asked."""
    groups: dict[tuple[str, str], list[int]] = {}
    singles: list[str] = []
    for name in kept:
        match = _INDEXED.match(name)
        if match is None:
            singles.append(re.escape(name))
            continue
        groups.setdefault((match["prefix"], match["suffix"] or ""), []).append(int(match["index"]))
    parts = []
    for (prefix, suffix), indexes in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        alternatives = "|".join(str(i) for i in sorted(indexes))
        index = alternatives if len(indexes) == 1 else f"(?:{alternatives})"
        parts.append(f"{re.escape(prefix)}{index}{re.escape(suffix)}")
    expression = "|".join(f"^{part}$" for part in parts + sorted(singles))
    matched = {name for name in all_names if expression and re.search(expression, name)}
    if matched != set(kept):
        raise AssertionError(f"exclusion {expression!r} matches {sorted(matched)}, not {sorted(kept)}")
    return expression


def probe_indexes(groups: Sequence[str], limit: int = ADVICE_PROBE_TEXTS) -> list[int]:
    """Up to limit texts taken round-robin over the groups (in name order), so every group is in the scan."""
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < min(limit, len(groups)):
        for group in sorted(members):
            if depth < len(members[group]) and len(chosen) < limit:
                chosen.append(members[group][depth])
        depth += 1
    return sorted(chosen)


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


def fewest_kept(
    n_layers: int, check: Callable[[int], VariantCheck]
) -> tuple[VariantCheck | None, VariantCheck]:
    """(the passing check with the fewest layers kept, the failing check with one fewer).

    check(m) keeps the m most sensitive layers in fp32. Keeping all of them is fp32 itself and is
    never run; (None, ...) when only that would pass."""
    low = check(0)
    if low.passed:
        return low, low
    high: VariantCheck | None = None
    lo, hi = 0, n_layers
    while hi - lo > 1:
        mid = (lo + hi) // 2
        result = check(mid)
        if result.passed:
            hi, high = mid, result
        else:
            lo, low = mid, result
    return high, low


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
    """The whole advice: scan, fewest kept, the expression loaded and verified, the three speeds.

    evaluate(vectors, kept) applies the whole gate to the whole set; fp32's network is borrowed for the
    variants and restored before this returns."""
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

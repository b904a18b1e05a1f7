"""The torch-free half of the int8 advice: its result model, the exclusion expression, the probe set, the
bisection of the number of layers kept (study/precision/advice.py runs them on the model), and the offline
encode speed of the variants: not a load test, the order rotates every round so that drift on a busy host
is shared out; the ratio to fp32 carries over to another host, the absolute texts/s does not."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel

from study.vectors import Encoder

# The hand-written exclusion the advice is measured against: every projection after attention in fp32.
ATTENTION_ONLY_EXCLUDE = r"output\.dense|intermediate"
ADVICE_PROBE_TEXTS = 36
_INDEXED = re.compile(r"^(?P<prefix>.*?\.)(?P<index>\d+)(?P<suffix>\..+)?$")
ENCODE_BATCH_SIZE = 32
BASELINE = "fp32"


class SpeedFigure(BaseModel):
    variant: str
    texts_per_s: float  # median over rounds
    round_s: list[float]  # seconds of each round, in round order
    ratio_to_fp32: float


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


def exclusion_regex(kept: Sequence[str], all_names: Sequence[str]) -> str:
    """An anchored expression matching exactly the kept names (layer indexes folded per role), checked
    against every Linear name so that it cannot keep more or fewer than asked."""
    groups: dict[tuple[str, str], list[int]] = {}
    singles: list[str] = []
    for name in kept:
        if (match := _INDEXED.match(name)) is None:
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


def fewest_kept(
    n_layers: int, check: Callable[[int], VariantCheck]
) -> tuple[VariantCheck | None, VariantCheck]:
    """(the passing check with the fewest layers kept, the failing one with one fewer); check(m) keeps the m most
    sensitive in fp32. Keeping all is fp32 itself, never run: (None, ...) when only that would pass."""
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


def method_text(n_texts: int, rounds: int) -> str:
    return (
        f"offline encode of the same {n_texts} texts (batches of {ENCODE_BATCH_SIZE}, sorted by length), "
        f"{rounds} interleaved round(s), median; the ratio to fp32 carries over, texts/s is this host's"
    )


def measure_speed(variants: Mapping[str, Encoder], texts: list[str], rounds: int) -> list[SpeedFigure]:
    """texts/s of every variant (a key must be "fp32": the ratios are to it)."""
    if BASELINE not in variants:
        raise ValueError(f"measure_speed needs a {BASELINE!r} variant for the ratios")
    names = list(variants)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            start = time.perf_counter()
            variants[name].encode(texts, batch_size=ENCODE_BATCH_SIZE)
            seconds[name].append(time.perf_counter() - start)
    rate = {name: len(texts) / statistics.median(values) for name, values in seconds.items()}
    return [
        SpeedFigure(
            variant=name,
            texts_per_s=rate[name],
            round_s=seconds[name],
            ratio_to_fp32=rate[name] / rate[BASELINE],
        )
        for name in names
    ]

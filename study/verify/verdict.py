"""The four-layer verdict: each layer's checks, the order the layers run in, and the one exit code.

Layers run in order and the first that fails stops the rest (not run): a service whose embeddings are
wrong is not worth a soak. A warning passes; only a failure blocks. A layer that could not finish or was
skipped with --layers leaves the verdict incomplete: a partial check is never a pass. Exit codes, as every
embedperf command's: 0 pass (warnings allowed), 1 a layer failed, 2 usage or pre-flight error (decided
before this module), 3 incomplete.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from embedperf.errors import EmbedperfError
from embedperf.verdicts import CheckVerdict
from study.verify.thresholds import VerifyThresholds

CheckStatus = CheckVerdict
LayerStatus = Literal["pass", "warn", "fail", "incomplete", "not_run", "skipped"]
Verdict = Literal["pass", "fail", "incomplete"]
EXIT_CODES: dict[Verdict, int] = {"pass": 0, "fail": 1, "incomplete": 3}
LAYER_TITLES: dict[int, str] = {
    1: "function and precision",
    2: "performance and utilisation",
    3: "stability",
    4: "operational readiness",
}


class Check(BaseModel):
    """One judged item of a layer: what was measured, against what, and the outcome."""

    name: str
    status: CheckStatus
    measured: str = Field(description="The figure or observation, with its unit.")
    limit: str = Field(default="", description="The threshold judged against (empty: a presence check).")
    note: str = ""

    @property
    def line(self) -> str:
        limit = f" (limit {self.limit})" if self.limit else ""
        note = f"; {self.note}" if self.note else ""
        return f"{self.name}: {self.measured}{limit}{note}"


class LayerResult(BaseModel):
    """One layer's section of the report: its checks, its evidence (run folders, files) and its line."""

    number: int
    title: str
    status: LayerStatus
    checks: list[Check] = Field(default_factory=list)
    evidence: dict[str, str] = Field(default_factory=dict, description="Name -> path or value backing checks")
    reason: str = Field("", description="Why the layer is incomplete, not run or skipped.")

    @property
    def line(self) -> str:
        """The layer's one pass/warn/fail line: the failures first, else the warnings."""
        head = f"layer {self.number} ({self.title}): {self.status.upper().replace('_', ' ')}"
        if self.reason:
            return f"{head}: {self.reason}"
        for wanted in ("fail", "warn"):
            if named := [c.line for c in self.checks if c.status == wanted]:
                return f"{head}: " + "; ".join(named)
        return f"{head}: {len(self.checks)} checks passed"


def at_most(
    name: str, value: float, limit: float, measured: str, unit: str = "", over: CheckStatus = "fail"
) -> Check:
    status: CheckStatus = "pass" if value <= limit else over
    return Check(name=name, status=status, measured=measured, limit=f"<= {limit:g}{unit}")


def at_least(
    name: str, value: float, limit: float, measured: str, unit: str = "", under: CheckStatus = "fail"
) -> Check:
    status: CheckStatus = "pass" if value >= limit else under
    return Check(name=name, status=status, measured=measured, limit=f">= {limit:g}{unit}")


def layer_status(checks: Sequence[Check]) -> LayerStatus:
    """fail if any check fails, warn if any warns, else pass; a layer with nothing judged is incomplete."""
    if not checks:
        return "incomplete"
    statuses = {c.status for c in checks}
    return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"


def judged(number: int, checks: list[Check], evidence: dict[str, str] | None = None) -> LayerResult:
    status = layer_status(checks)
    reason = "nothing was judged" if status == "incomplete" else ""
    return _result(number, status, reason, checks=checks, evidence=evidence or {})


def _result(number: int, status: LayerStatus, reason: str, **found: Any) -> LayerResult:
    return LayerResult(number=number, title=LAYER_TITLES[number], status=status, reason=reason, **found)


@dataclass(frozen=True)
class Layer:
    number: int
    run: Callable[[], LayerResult]


def run_layers(layers: Sequence[Layer], selected: Sequence[int]) -> list[LayerResult]:
    """The selected layers in order, none after a failed or incomplete one; an EmbedperfError inside a layer
    (its load run stopped, the target refused) makes it incomplete with that reason, never a traceback."""
    results: list[LayerResult] = []
    stopped_by: LayerResult | None = None
    for layer in sorted(layers, key=lambda item: item.number):
        if layer.number not in selected:
            results.append(_result(layer.number, "skipped", "not selected (--layers)"))
            continue
        if stopped_by is not None:
            stopped = f"layer {stopped_by.number} is {stopped_by.status.replace('_', ' ')}"
            results.append(_result(layer.number, "not_run", stopped))
            continue
        try:
            result = layer.run()
        except EmbedperfError as exc:
            result = _result(layer.number, "incomplete", str(exc))
        results.append(result)
        if result.status in ("fail", "incomplete"):
            stopped_by = result
    return results


def verdict(layers: Sequence[LayerResult]) -> Verdict:
    statuses = {layer.status for layer in layers}
    if "fail" in statuses:
        return "fail"
    if statuses & {"incomplete", "skipped", "not_run"} or len(layers) < len(LAYER_TITLES):
        return "incomplete"
    return "pass"


class VerifyResult(BaseModel):
    """Everything one `embedperf verify` found: written as JSON, rendered as the HTML report and JUnit."""

    target: str
    started_unix_s: float
    finished_unix_s: float
    thresholds: VerifyThresholds
    layers: list[LayerResult]
    verdict: Verdict
    exit_code: int
    notes: list[str] = Field(default_factory=list)

    @property
    def failed_layer(self) -> LayerResult | None:
        return next((layer for layer in self.layers if layer.status == "fail"), None)

    @property
    def headline(self) -> str:
        """One line for the console and CI logs."""
        if (failed := self.failed_layer) is not None:
            return f"FAIL at {failed.line}"
        if self.verdict == "incomplete":
            missing = [f"{layer.number} {layer.status.replace('_', ' ')}" for layer in self.layers if layer.status in
                       ("incomplete", "skipped", "not_run")]  # fmt: skip
            return "INCOMPLETE: layer " + ", ".join(missing)
        warned = sum(1 for layer in self.layers if layer.status == "warn")
        return "PASS: every layer passed" + (f" ({warned} with warnings)" if warned else "")


def build_result(
    target: str, started_unix_s: float, finished_unix_s: float, thresholds: VerifyThresholds,
    layers: list[LayerResult], notes: list[str],
) -> VerifyResult:
    """The result with its verdict and exit code decided here, in one place."""
    decided = verdict(layers)
    return VerifyResult(
        target=target, started_unix_s=started_unix_s, finished_unix_s=finished_unix_s, thresholds=thresholds,
        layers=layers, verdict=decided, exit_code=EXIT_CODES[decided], notes=notes,
    )

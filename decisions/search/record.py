"""What a capacity search leaves behind: manifest.search (SearchRecord), summary.json `search` and the answer's words.

Writers (the search driver) and readers (summary, report, `embedperf capacity`, the matrix) share
these models, so a field added here reaches every reader typed; fields added later carry defaults
so manifests written before them still load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from decisions.search.stats import Params, Verdict
from embedperf.schema import Manifest

Phase = Literal["bracket", "bisect", "repeat", "confirm"]
# "uncertain": written by searches that stopped at their first uncertain rate; still read
SearchStatus = Literal[
    "found", "at_slo", "wide_interval", "uncertain", "below_min_rate", "above_max_rate", "max_duration",
    "unconfirmed",
]
Outcome = Literal["answer", "no_rate", "not_narrowed"]

# How each status ends for a pipeline: an answer to --precision, no rate meeting the SLO, or a search
# that could not narrow to --precision (study.bench.search maps these to exit codes 0, 1 and 4).
OUTCOMES: dict[str, Outcome] = {
    "found": "answer", "at_slo": "answer", "above_max_rate": "answer", "below_min_rate": "no_rate",
    "wide_interval": "not_narrowed", "uncertain": "not_narrowed", "max_duration": "not_narrowed",
    "unconfirmed": "not_narrowed",
}  # fmt: skip

# Why a search stopped where it did: status -> English text (str.format params, SearchRecord.note_params).
# The report renders the same statuses in its own language (reports/i18n.py keys sn_<status>).
NOTES: dict[str, str] = {
    "found": "",
    "at_slo": (
        "at {rate:g} req/s the P99 is at the SLO within its {confidence_pct:g}% interval "
        "({lower_ms:.1f}-{upper_ms:.1f} ms); the SLO is met with confidence up to {answer:g} req/s"
    ),
    "wide_interval": (
        "at {rate:g} req/s, {gap_pct:.0f}% above the answer {answer:g} req/s (more than --precision "
        "{precision_pct:g}%), the P99's {confidence_pct:g}% interval ({lower_ms:.1f}-{upper_ms:.1f} ms) still "
        "contains the SLO: with {samples:g} ok answers the interval is too wide to narrow the answer; raise "
        "--min-ok-requests (and --max-probe-s so probes can collect them)"
    ),
    "uncertain": "the P99 at {rate:g} req/s stays within its interval of the SLO",
    "unconfirmed": "the confirming probe at {rate:g} req/s failed",
    "above_max_rate": "every probe up to max_rate {rate:g} req/s passed",
    "below_min_rate": (
        "even {rate:g} req/s, the lowest rate this search probes, does not meet the SLO with confidence "
        "(below {floor:.3g} req/s a probe of {probe_s:g} s collects fewer than {samples:g} ok answers)"
    ),
    # the lowest rate failed on errors: the cause is the errors, not the P99's confidence
    "below_min_rate_errors": (
        "even {rate:g} req/s, the lowest rate this search probes, fails on errors: {error_rate_pct:.1f}% of "
        "its requests failed (error budget {budget_pct:g}%); the target refuses or fails this load"
    ),
    "max_duration": "stopped at --max-duration {seconds:g} s",
}


class Strict(BaseModel):
    """A search model that refuses unknown fields rather than dropping them."""

    model_config = ConfigDict(extra="forbid")


def note_key(status: str, params: Mapping[str, object]) -> str:
    """The NOTES (and report sn_<key>) entry of a status: a `cause` parameter names a variant of it."""
    cause = params.get("cause")
    return f"{status}_{cause}" if cause else status


class ProbeRecord(Strict):
    """One probe as the manifest keeps it (step index = the run folder's stage index). Rates, counts and
    the duration are this probe's own; the percentiles, their interval and the verdict are from the sample
    it was judged on (a repeat pools its own with the probe it repeats)."""

    stage_index: int
    label: str
    phase: Phase
    rate: float
    duration_s: float = Field(description="This probe's steady window (its warm-up left out), in seconds.")
    scheduled: int
    ok: int
    error_rate: float
    offered_rps: float
    goodput_rps: float
    unfinished: int = Field(default=0, description="Requests still unanswered when the probe's drain ended.")
    judged_samples: int = Field(
        default=0, description="Latency samples the verdict used (a repeat's include the repeated probe's)."
    )
    p50_ms: float | None
    p99_ms: float | None
    p99_lower_ms: float | None
    p99_upper_ms: float | None
    verdict: Verdict
    reason: str
    reason_code: str = Field(
        "", description="Key of decisions.search.stats.REASONS; the report translates it."
    )
    reason_params: Params = Field(default_factory=dict)


class SearchRecord(Strict):
    """manifest.search: the rule, every probe in run order, the bracket history and the answer."""

    rule: str
    slo_p99_ms: float
    error_budget_pct: float
    precision: float
    confidence: float
    arrival: str
    growth: float = 2.0
    goodput_tolerance: float = 0.05
    confirm_factor: float = 2.0
    samples_needed: int | None = Field(default=None, description="Ok answers each probe aims for.")
    floor_rps: float | None = Field(
        default=None, description="The lowest rate at which a probe of max_probe_s collects samples_needed."
    )
    min_rate_rps: float | None = Field(None, description="The lowest rate probed: max(min_rate, floor).")
    probes: list[ProbeRecord] = Field(default_factory=list)
    brackets: list[tuple[float | None, float | None]] = Field(
        default_factory=list,
        description="(highest passing, lowest not passing: failing or at the SLO) rate after each probe.",
    )
    status: SearchStatus = "found"
    answer_rps: float | None = None
    answer_p99_ms: float | None = None
    answer_p99_lower_ms: float | None = Field(
        default=None, description="The answer's P99 interval, lower end."
    )
    answer_p99_upper_ms: float | None = Field(
        default=None, description="The answer's P99 interval, upper end."
    )
    uncertainty_rps: tuple[float | None, float | None] = Field(
        default=(None, None), description="The answer lies between these rates (the final bracket)."
    )
    at_slo_rps: float | None = Field(
        default=None,
        description="The highest rate above the answer whose P99 interval contains the SLO (None if none).",
    )
    confirm_stage_index: int | None = None
    note: str = ""
    note_params: Params = Field(default_factory=dict, description="Parameters of NOTES[status].")

    @property
    def outcome(self) -> Outcome:
        """answer, no_rate or not_narrowed: what the status means for a pipeline (OUTCOMES)."""
        return OUTCOMES[self.status]


def read_search(manifest: Manifest) -> SearchRecord | None:
    """manifest.search back as the typed record it was written from (None for runs without a search)."""
    raw = (manifest.model_extra or {}).get("search")
    return SearchRecord.model_validate(raw) if raw else None


def devices_serving(manifest: Manifest) -> int:
    """How many devices the answer is divided by: the run's serving devices (1 when none is known)."""
    return max(len(manifest.serving_devices.indices), 1)


def headline(record: SearchRecord, devices: int) -> str:
    """'N req/s per device at P99 <= X ms' with its bracket and P99 interval (or why there is no such N)."""
    if record.answer_rps is None and record.note_params.get("cause") == "errors":
        return f"no probed rate is served within the error budget ({record.status}: {record.note})"
    if record.answer_rps is None:
        return f"no probed rate meets P99 <= {record.slo_p99_ms:g} ms ({record.status}: {record.note})"
    per_device = record.answer_rps / max(devices, 1)
    low, high = record.uncertainty_rps
    span = f", between {low:g} and {high:g} req/s" if high is not None else ""
    measured = ""
    if record.answer_p99_ms is not None:
        low_ms, high_ms = record.answer_p99_lower_ms, record.answer_p99_upper_ms
        bounded = low_ms is not None and high_ms is not None
        interval = f" ({record.confidence:.0%} interval {low_ms:.1f}-{high_ms:.1f} ms)" if bounded else ""
        measured = f"; measured P99 {record.answer_p99_ms:.1f} ms{interval}"
    tail = "" if record.status == "found" else f" [{record.status}: {record.note}]"
    return (
        f"{per_device:.1f} req/s per device at P99 <= {record.slo_p99_ms:g} ms "
        f"({record.answer_rps:g} req/s on {devices} device(s){span}{measured}){tail}"
    )


class SearchSlo(Strict):
    p99_ms: float
    error_budget_pct: float


class SearchSummary(Strict):
    """summary.json `search`: the searched answer for CI tools and the matrix, without the manifest."""

    status: SearchStatus
    outcome: Outcome = Field(
        default="answer",
        description="answer (exit 0), no_rate (exit 1) or not_narrowed (exit 4) of `embedperf search`.",
    )
    answer_rps: float | None = Field(description="Highest rate that met the SLO (all serving devices).")
    per_device_rps: float | None = Field(description="answer_rps / devices.")
    devices: int
    p99_ms: float | None = Field(description="P99 measured at the answer (the confirming probe's).")
    p99_lower_ms: float | None = Field(default=None, description="The answer's P99 interval, lower end.")
    p99_upper_ms: float | None = Field(default=None, description="The answer's P99 interval, upper end.")
    slo: SearchSlo
    precision: float | None = Field(default=None, description="The bracket width the search aimed for.")
    bracket: tuple[float | None, float | None] = Field(
        description="(highest passing, lowest not passing) rate: the answer's uncertainty."
    )
    at_slo_rps: float | None = Field(
        default=None, description="Highest rate above the answer whose P99 interval contains the SLO."
    )
    probes: int
    note: str = ""


def search_summary(manifest: Manifest) -> SearchSummary | None:
    """The answer of a search run as summary.json carries it (None for runs that were not a search)."""
    record = read_search(manifest)
    if record is None:
        return None
    devices = devices_serving(manifest)
    answer = record.answer_rps
    return SearchSummary(
        status=record.status, outcome=record.outcome, answer_rps=answer,
        per_device_rps=answer / devices if answer is not None else None, devices=devices,
        p99_ms=record.answer_p99_ms, p99_lower_ms=record.answer_p99_lower_ms,
        p99_upper_ms=record.answer_p99_upper_ms,
        slo=SearchSlo(p99_ms=record.slo_p99_ms, error_budget_pct=record.error_budget_pct),
        precision=record.precision, bracket=record.uncertainty_rps, at_slo_rps=record.at_slo_rps,
        probes=len(record.probes), note=record.note,
    )  # fmt: skip


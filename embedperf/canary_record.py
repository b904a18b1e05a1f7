"""RUN_DIR/canary.json: a canary's windows as judged live, and its verdict (the writer and readers' one model).

The canary monitor rewrites it after every judged window (atomically), so it is also the live status
of a canary in progress; its final `status` is the verdict the run acted on. The figures here are
those the triggers saw (rows on disk when the window was judged); the report's per-window tables are
recomputed from every row by analysis.run.canary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from embedperf.errors import RunFolderError
from embedperf.files import write_atomically
from embedperf.verdicts import CanaryVerdict

CANARY_FILE = "canary.json"
SIDES: tuple[str, str] = ("baseline", "candidate")
Side = Literal["baseline", "candidate"]
CanaryStatus = CanaryVerdict | Literal["running", "incomplete"]
TriggerName = Literal["error_rate", "p99_ms", "p99_increase", "agreement", "temperature", "unavailable"]
EXIT_CODES: dict[str, int] = {"promote": 0, "rollback": 1, "no_verdict": 2, "incomplete": 3, "running": 3}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SideWindow(_Strict):
    """One side's figures in one window (requests by send time; latency of ok requests)."""

    requests: int = 0
    ok: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    goodput_rps: float = 0.0
    unavailable_s: int = 0

    @property
    def errors(self) -> int:
        return self.requests - self.ok

    @property
    def error_rate_pct(self) -> float | None:
        return 100.0 * self.errors / self.requests if self.requests else None


class WindowJudgement(_Strict):
    """One window of one stage, both sides, and what the triggers made of it."""

    stage_index: int
    window_index: int
    weight_pct: float = Field(description="The candidate's share of the load in the stage, in percent.")
    start_unix_s: float
    end_unix_s: float
    baseline: SideWindow = Field(default_factory=SideWindow)
    candidate: SideWindow = Field(default_factory=SideWindow)
    agreement_n: int = Field(
        default=0, description="Texts sent to both sides in the window whose answers were compared."
    )
    agreement_mean: float | None = Field(default=None, description="Mean cosine of the two sides' answers to them.")
    agreement_min: float | None = None
    temp_c_max: float | None = Field(default=None, description="Hottest candidate device sampled in the window.")
    p99_limit_ms: float | None = Field(
        default=None, description="The P99 the candidate had to stay under (tightest limit)."
    )
    p99_over: bool = False
    p99_streak: int = Field(default=0, description="Consecutive windows, this one included, over a P99 limit.")
    thin: bool = Field(default=False, description="The candidate had too few requests for its rate and P99 triggers.")


class CanaryRecord(_Strict):
    """canary.json."""

    baseline_url: str
    candidate_url: str
    stages_pct: list[float]
    window_s: float
    windows_per_stage: int
    candidate_info: dict[str, Any] | None = Field(default=None, description="The candidate's /info, when it has one.")
    windows: list[WindowJudgement] = Field(default_factory=list)
    running_stage_index: int | None = Field(default=None, description="The stage under way when the file was written.")
    status: CanaryStatus = "running"
    trigger: TriggerName | None = None
    stage_index: int | None = Field(default=None, description="Where the verdict was taken (a trigger's stage).")
    window_index: int | None = None
    line: str = Field(default="", description="The verdict in one line, with the numbers.")
    updated_unix_s: float | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def canary_path(run_root: Path) -> Path:
    return run_root / CANARY_FILE


def write_canary_record(run_root: Path, record: CanaryRecord) -> Path:
    return write_atomically(canary_path(run_root), record.model_dump_json(indent=2))


def read_canary_record(run_root: Path) -> CanaryRecord | None:
    """The record of a canary run folder; None for a run that was no canary."""
    path = canary_path(run_root)
    if not path.is_file():
        return None
    try:
        return CanaryRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError) as exc:
        raise RunFolderError(f"{path} is not a canary record ({exc}); rerun `embedperf canary`") from exc

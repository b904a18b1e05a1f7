"""What a sweep measures: the grid's axes and how long each cell may run; recorded in sweep.json."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from embedperf.files import write_atomically
from scenarios.until_models import Until

SWEEP_FILE = "sweep.json"


class SweepSpec(BaseModel):
    """The grid: one run per (inputs per request, text length), one adaptive step per user count."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = Field("ramp", description="Closed-loop scenario whose target, payload and SLO cells use.")
    inputs: list[int] = Field(default_factory=lambda: [1, 4, 16, 64], description="Inputs per request (rows)")
    users: list[int] = Field(default_factory=lambda: [1, 4, 16], description="Concurrent users (columns).")
    tokens: list[int] = Field(
        default_factory=list, description="Tokens per input, one grid each (empty: the scenario's texts)."
    )
    step_max_s: float = Field(30.0, gt=0, description="A cell's longest time, warm-up included.")
    warmup_s: float = Field(2.0, ge=0, description="Seconds at the start of each cell the analysis trims.")
    until: Until = Field(
        default_factory=lambda: Until(p99_rel_width=0.25, min_requests=400, min_s=3.0),
        description="When a cell's P99 is known (steps.until).",
    )
    slo_p99_ms: float | None = Field(None, gt=0, description="P99 SLO of the best cell (default: scenario's)")

    @field_validator("inputs", "users", "tokens")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values):
            raise ValueError(f"every grid value must be at least 1, got {values}")
        return sorted(set(values))


class SweepRun(BaseModel):
    """One run of the sweep: a request shape and its run folder (relative to the sweep folder)."""

    inputs: int
    tokens: int | None
    run_dir: str | None
    exit_code: int


class SweepRecord(BaseModel):
    """sweep.json: the spec and the runs, enough to rebuild the report."""

    spec: SweepSpec
    runs: list[SweepRun] = []
    started_unix_s: float
    finished_unix_s: float | None = None

    def write(self, folder: Path) -> None:
        write_atomically(folder / SWEEP_FILE, self.model_dump_json(indent=2))

    @classmethod
    def read(cls, folder: Path) -> SweepRecord:
        return cls.model_validate(json.loads((folder / SWEEP_FILE).read_text(encoding="utf-8")))

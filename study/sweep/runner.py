"""A sweep's runs: one closed-loop run per request shape (inputs per request, text length), whose adaptive steps
are the users of the grid; each run is an ordinary run folder under the sweep folder's runs/."""

from __future__ import annotations

import json
import time
from pathlib import Path

from loadgen.cli.runner import run_scenario_outcome
from scenarios.loader import load_scenario
from study.sweep.spec import SweepRecord, SweepRun, SweepSpec

RUNS_SUBDIR = "runs"


def shape_overrides(spec: SweepSpec, inputs: int, tokens: int | None) -> dict[str, str]:
    """The `--set` overrides of one request shape: its inputs, its text length, one adaptive step per user count."""
    step = {"duration_s": spec.step_max_s, "warmup_s": spec.warmup_s, "until": spec.until.model_dump()}
    steps = [{"label": f"u{u}", "users": u, **step} for u in spec.users]
    out = {
        "payload.inputs_per_request": json.dumps([{"n": inputs, "weight": 1.0}]), "steps": json.dumps(steps)
    }
    if tokens is not None:
        out["payload.tokens"] = json.dumps(
            {"distribution": "fixed", "mean": tokens, "min": 1, "max": max(tokens, 1)}
        )
    if spec.slo_p99_ms is not None:
        out["slo.p99_ms"] = str(spec.slo_p99_ms)
    return out


def shape_tokens(spec: SweepSpec) -> list[int | None]:
    """The text lengths to sweep; [None]: the scenario's own texts."""
    return list(spec.tokens) if spec.tokens else [None]


def check_spec(spec: SweepSpec, overrides: dict[str, str]) -> None:
    """Every shape's scenario loads (bad axes or a scenario that is not closed loop fail before any run)."""
    for inputs in spec.inputs:
        for tokens in shape_tokens(spec):
            load_scenario(spec.scenario, overrides={**overrides, **shape_overrides(spec, inputs, tokens)})


def run_sweep(spec: SweepSpec, host: str, folder: Path, overrides: dict[str, str]) -> SweepRecord:
    """Run every request shape against host; sweep.json is rewritten after each run (a crash keeps the rest)."""
    runs_dir = folder / RUNS_SUBDIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    record = SweepRecord(spec=spec, started_unix_s=time.time())
    record.write(folder)
    for tokens in shape_tokens(spec):
        for inputs in spec.inputs:
            label = f"n{inputs}" + (f"-t{tokens}" if tokens is not None else "")
            print(f"sweep: {label}: users {', '.join(map(str, spec.users))} ...", flush=True)
            outcome = run_scenario_outcome(
                spec.scenario,
                host=host,
                runs_dir=runs_dir,
                label=label,
                overrides={**overrides, **shape_overrides(spec, inputs, tokens)},
                collectors=False,
            )
            run_dir = str(outcome.folder.root.relative_to(folder)) if outcome.folder is not None else None
            record.runs.append(
                SweepRun(inputs=inputs, tokens=tokens, run_dir=run_dir, exit_code=outcome.exit_code)
            )
            record.write(folder)
    record.finished_unix_s = time.time()
    record.write(folder)
    return record

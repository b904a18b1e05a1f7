"""What a CI system reads from `embedperf canary`: a JSON verdict and a JUnit XML file, as `compare` writes them.

JUnit layout: one <testsuite> for the candidate against the baseline, one <testcase> per stage and
enabled trigger. The trigger that fired is a <failure> carrying the verdict line; stages the canary
never reached (it stopped first) are <skipped>; a stage too thin to judge is <skipped> with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from embedperf.canary_record import CanaryRecord, read_canary_record
from embedperf.errors import RunFolderError
from embedperf.files import write_atomically
from embedperf.schema import RunFolder, read_manifest
from reports.ci_outputs import JUnitCase, junit_document
from scenarios.canary_models import Rollback

TRIGGER_FIELDS: dict[str, str] = {  # trigger name -> the rollback field that enables it
    "error_rate": "max_error_rate_pct",
    "unavailable": "max_unavailable_s",
    "agreement": "min_agreement_cosine",
    "temperature": "max_temp_c",
    "p99_ms": "max_p99_ms",
    "p99_increase": "max_p99_increase_pct",
}


def _record(folder: RunFolder) -> tuple[CanaryRecord, Rollback]:
    record = read_canary_record(folder.root)
    if record is None:
        raise RunFolderError(f"{folder.root} holds no canary.json: it was not written by `embedperf canary`")
    return record, read_manifest(folder).scenario.rollback


def canary_json(folder: RunFolder, html_path: Path | None = None) -> dict[str, Any]:
    """The verdict, the exit code, the triggers as configured and every window as judged."""
    record, rollback = _record(folder)
    verdict = ("status", "exit_code", "line", "trigger", "stage_index", "window_index")
    return {key: getattr(record, key) for key in verdict} | {
        "baseline": record.baseline_url,
        "candidate": record.candidate_url,
        "run": folder.run_id,
        "report": str(html_path) if html_path else None,
        "rollback": rollback.model_dump(mode="json"),
        "stages_pct": record.stages_pct,
        "windows": [w.model_dump(mode="json") for w in record.windows],
    }


def write_canary_json(path: Path, folder: RunFolder, html_path: Path | None = None) -> Path:
    return write_atomically(path, json.dumps(canary_json(folder, html_path), indent=2, allow_nan=False))


def canary_junit(folder: RunFolder) -> str:
    record, rollback = _record(folder)
    enabled = [name for name, attr in TRIGGER_FIELDS.items() if getattr(rollback, attr) is not None]
    reached = {w.stage_index for w in record.windows}
    cases = []
    for index, weight in enumerate(record.stages_pct):
        for name in enabled:
            outcome: Literal["passed", "failure", "skipped"] = "skipped"
            message = record.line
            if record.status == "rollback" and record.trigger == name and record.stage_index == index:
                outcome = "failure"
            elif index not in reached:
                message = f"stage not reached: {record.line}"
            elif record.status != "no_verdict" or record.stage_index != index:
                outcome, message = "passed", f"no {name} trigger at stage {index + 1}"
            classname = f"embedperf.canary.stage{index + 1}"
            cases.append(JUnitCase(classname, f"{name} @ {weight:g}%", outcome, message, "rollback"))
    suite = f"{record.candidate_url} vs {record.baseline_url}"
    return junit_document("embedperf canary", [(suite, cases)])


def write_canary_junit(path: Path, folder: RunFolder) -> Path:
    return write_atomically(path, canary_junit(folder))

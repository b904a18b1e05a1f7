"""What a CI system reads from `embedperf canary`: a JSON verdict and a JUnit XML file, as `compare` writes them.

JUnit layout: one <testsuite> for the candidate against the baseline, one <testcase> per stage and
enabled trigger. The trigger that fired is a <failure> carrying the verdict line; stages the canary
never reached (it stopped first) are <skipped>; a stage too thin to judge is <skipped> with the reason.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from embedperf.canary_record import CanaryRecord, read_canary_record
from embedperf.errors import RunFolderError
from embedperf.schema import RunFolder, read_manifest
from reports.ci_outputs import _atomic_write
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
    return {
        "status": record.status,
        "exit_code": record.exit_code,
        "line": record.line,
        "trigger": record.trigger,
        "stage_index": record.stage_index,
        "window_index": record.window_index,
        "baseline": record.baseline_url,
        "candidate": record.candidate_url,
        "run": folder.run_id,
        "report": str(html_path) if html_path else None,
        "rollback": rollback.model_dump(mode="json"),
        "stages_pct": record.stages_pct,
        "windows": [w.model_dump(mode="json") for w in record.windows],
    }


def write_canary_json(path: Path, folder: RunFolder, html_path: Path | None = None) -> Path:
    _atomic_write(path, json.dumps(canary_json(folder, html_path), indent=2, allow_nan=False))
    return path


def canary_junit(folder: RunFolder) -> str:
    record, rollback = _record(folder)
    enabled = [name for name, attr in TRIGGER_FIELDS.items() if getattr(rollback, attr) is not None]
    root = ET.Element("testsuites", name="embedperf canary")
    suite = ET.SubElement(root, "testsuite", name=f"{record.candidate_url} vs {record.baseline_url}")
    reached = {w.stage_index for w in record.windows}
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for index, weight in enumerate(record.stages_pct):
        for name in enabled:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"embedperf.canary.stage{index + 1}",
                name=f"{name} @ {weight:g}%",
            )
            case.set("time", "0")
            counts["tests"] += 1
            if record.status == "rollback" and record.trigger == name and record.stage_index == index:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=record.line, type="rollback").text = record.line
            elif index not in reached:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"stage not reached: {record.line}")
            elif record.status == "no_verdict" and record.stage_index == index:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=record.line)
            else:
                ET.SubElement(case, "system-out").text = f"no {name} trigger at stage {index + 1}"
    for key, value in counts.items():
        suite.set(key, str(value))
        root.set(key, str(value))
    for element in (suite, root):
        element.set("errors", "0")
    suite.set("time", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_canary_junit(path: Path, folder: RunFolder) -> Path:
    _atomic_write(path, canary_junit(folder))
    return path

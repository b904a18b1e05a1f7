"""What a CI system reads from `embedperf compare`: a JSON verdict and a JUnit XML file.

JUnit layout: one <testsuite> per candidate, one <testcase> per gate rule and matched step, and the
error budget at every candidate step. A failed rule is a <failure> whose message carries the numbers;
a rule without a verdict is <skipped> with the reason; loads that do not match add one skipped "step
matching" case listing the unmatched steps, and steps without ok requests one skipped "ok requests"
case listing them.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from analysis.compare.changes import CandidateComparison, Comparison

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "no_verdict": 2}


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _candidate_json(cand: CandidateComparison) -> dict[str, Any]:
    data = cand.model_dump(mode="json")
    data["status"] = cand.status
    data["failures"] = cand.failures
    data["no_verdict_reasons"] = cand.no_verdict_reasons
    data["warnings"] = cand.warnings
    return data


def comparison_json(comparison: Comparison, html_path: Path | None = None) -> dict[str, Any]:
    """The comparison as plain JSON: overall status, exit code, and every candidate's figures and gate."""
    return {
        "status": comparison.status,
        "exit_code": EXIT_CODES[comparison.status],
        "baseline": comparison.base_run_id,
        "rules": [r.text for r in comparison.rules],
        "percentile_method": comparison.percentile_method,
        "report": str(html_path) if html_path else None,
        "candidates": [_candidate_json(c) for c in comparison.candidates],
    }


def write_json(path: Path, comparison: Comparison, html_path: Path | None = None) -> Path:
    _atomic_write(path, json.dumps(comparison_json(comparison, html_path), indent=2, allow_nan=False))
    return path


def _suite(parent: ET.Element, comparison: Comparison, cand: CandidateComparison) -> None:
    suite = ET.SubElement(parent, "testsuite", name=f"{cand.label} vs {comparison.base_run_id}")
    classname = f"embedperf.compare.{cand.label}"
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for result in cand.gate:
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"{result.rule} @ {result.scope}")
        case.set("time", "0")
        counts["tests"] += 1
        if result.status == "fail":
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=result.line, type="gate")
            failure.text = result.line
        elif result.status == "no_verdict":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=result.line)
        else:
            ET.SubElement(case, "system-out").text = result.line
    if cand.unmatched:
        case = ET.SubElement(suite, "testcase", classname=classname, name="step matching (users/rate)")
        case.set("time", "0")
        counts["tests"] += 1
        counts["skipped"] += 1
        ET.SubElement(case, "skipped", message="loads differ: " + "; ".join(cand.unmatched))
    if cand.empty_steps:
        case = ET.SubElement(suite, "testcase", classname=classname, name="ok requests at every matched step")
        case.set("time", "0")
        counts["tests"] += 1
        counts["skipped"] += 1
        ET.SubElement(case, "skipped", message="; ".join(cand.empty_steps))
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    suite.set("time", "0")


def junit_xml(comparison: Comparison) -> str:
    root = ET.Element("testsuites", name="embedperf compare")
    for cand in comparison.candidates:
        _suite(root, comparison, cand)
    for key in ("tests", "failures", "skipped", "errors"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in root)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, comparison: Comparison) -> Path:
    _atomic_write(path, junit_xml(comparison))
    return path

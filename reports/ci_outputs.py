"""What a CI system reads from `embedperf compare`: a JSON verdict and a JUnit XML file.

JUnit layout: one <testsuite> per candidate, one <testcase> per gate rule and matched step, and the error
budget at every candidate step. A failed rule is a <failure> whose message carries the numbers; a rule without
a verdict is <skipped> with the reason; loads that do not match add one skipped "step matching" case listing
the unmatched steps, and steps without ok requests one skipped "ok requests" case listing them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from analysis.compare.changes import CandidateComparison, Comparison
from embedperf.files import write_atomically

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "no_verdict": 2}


def _candidate_json(cand: CandidateComparison) -> dict[str, Any]:
    return cand.model_dump(mode="json") | {
        "status": cand.status,
        "failures": cand.failures,
        "no_verdict_reasons": cand.no_verdict_reasons,
        "warnings": cand.warnings,
    }


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
    data = comparison_json(comparison, html_path)
    return write_atomically(path, json.dumps(data, indent=2, allow_nan=False))


@dataclass(frozen=True)
class JUnitCase:
    """One <testcase>: passed (the message as its output), failed or skipped (the message says why)."""

    classname: str
    name: str
    outcome: Literal["passed", "failure", "skipped"]
    message: str
    failure_type: str = ""


def junit_document(name: str, suites: list[tuple[str, list[JUnitCase]]]) -> str:
    """<testsuites> with one <testsuite> per (name, cases), each and the whole counting its cases."""
    root = ET.Element("testsuites", name=name)
    totals = dict.fromkeys(("tests", "failures", "skipped", "errors"), 0)
    for suite_name, cases in suites:
        n = Counter(c.outcome for c in cases)
        counts = {"tests": len(cases), "failures": n["failure"], "skipped": n["skipped"], "errors": 0}
        totals = {key: totals[key] + n for key, n in counts.items()}
        suite = ET.SubElement(root, "testsuite", {"name": suite_name, **_texts(counts), "time": "0"})
        for c in cases:
            case = ET.SubElement(suite, "testcase", classname=c.classname, name=c.name, time="0")
            if c.outcome == "failure":
                ET.SubElement(case, "failure", message=c.message, type=c.failure_type).text = c.message
            elif c.outcome == "skipped":
                ET.SubElement(case, "skipped", message=c.message)
            else:
                ET.SubElement(case, "system-out").text = c.message
    root.attrib.update(_texts(totals))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _texts(counts: dict[str, int]) -> dict[str, str]:
    return {key: str(n) for key, n in counts.items()}


def _cases(cand: CandidateComparison) -> list[JUnitCase]:
    classname = f"embedperf.compare.{cand.label}"
    outcomes: dict[str, Literal["failure", "skipped"]] = {"fail": "failure", "no_verdict": "skipped"}
    cases = [
        JUnitCase(classname, f"{r.rule} @ {r.scope}", outcomes.get(r.status, "passed"), r.line, "gate")
        for r in cand.gate
    ]
    if cand.unmatched:
        message = "loads differ: " + "; ".join(cand.unmatched)
        cases.append(JUnitCase(classname, "step matching (users/rate)", "skipped", message))
    if cand.empty_steps:
        message = "; ".join(cand.empty_steps)
        cases.append(JUnitCase(classname, "ok requests at every matched step", "skipped", message))
    return cases


def junit_xml(comparison: Comparison) -> str:
    suites = [(f"{c.label} vs {comparison.base_run_id}", _cases(c)) for c in comparison.candidates]
    return junit_document("embedperf compare", suites)


def write_junit(path: Path, comparison: Comparison) -> Path:
    return write_atomically(path, junit_xml(comparison))

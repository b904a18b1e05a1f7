"""What `embedperf verify` leaves: verify.json (the typed result), report.html (rendered from it alone) and JUnit
(a <testsuite> per layer, a <testcase> per check: a failure with its line, a warning passing with it in
<system-out>; a layer that did not run is one case, skipped, or failed when incomplete).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from reports.build import check_lang, write_html
from reports.render import render
from study.verify.verdict import VerifyResult

RESULT_FILE = "verify.json"
REPORT_FILE = "report.html"


def _atomic_write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_result(result: VerifyResult, path: Path) -> Path:
    return _atomic_write(path, result.model_dump_json(indent=2))


def read_result(path: Path) -> VerifyResult:
    return VerifyResult.model_validate_json(path.read_text(encoding="utf-8"))


def render_verify_report(result: VerifyResult, lang: str = "en") -> str:
    return render("verify.html.j2", check_lang(lang), r=result)


def write_verify_report(result: VerifyResult, path: Path, lang: str = "en") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_html(path, render_verify_report(result, lang))
    return path


def junit_xml(result: VerifyResult) -> str:
    root = ET.Element("testsuites", name="embedperf verify")
    for layer in result.layers:
        suite = ET.SubElement(root, "testsuite", name=f"layer {layer.number}: {layer.title}")
        classname = f"embedperf.verify.layer{layer.number}"
        counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0, "time": 0}
        cases: list[tuple[str, str, str]] = [(check.name, check.status, check.line) for check in layer.checks]
        if layer.status in ("skipped", "not_run", "incomplete"):
            cases.insert(0, (layer.title, layer.status, layer.line))
        for name, status, line in cases:
            case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
            counts["tests"] += 1
            if status in ("fail", "incomplete"):
                counts["failures"] += 1
                kind = "verify" if status == "fail" else "incomplete"
                ET.SubElement(case, "failure", message=line, type=kind).text = line
            elif status in ("skipped", "not_run"):
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=line)
            else:
                ET.SubElement(case, "system-out").text = f"{status.upper()}: {line}"
        for key, value in counts.items():
            suite.set(key, str(value))
    for key in ("tests", "failures", "skipped", "errors"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in root)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(result: VerifyResult, path: Path) -> Path:
    return _atomic_write(path, junit_xml(result))

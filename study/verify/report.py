"""What `embedperf verify` leaves: verify.json (the typed result), report.html (rendered from it alone) and JUnit
(a <testsuite> per layer, a <testcase> per check: a failure with its line, a warning passing with it in
<system-out>; a layer that did not run is one case, skipped, or failed when incomplete).
"""

from __future__ import annotations

from pathlib import Path

from embedperf.files import write_atomically
from reports.build import check_lang
from reports.ci_outputs import JUnitCase, junit_document
from reports.render import render
from study.verify.verdict import VerifyResult

RESULT_FILE = "verify.json"
REPORT_FILE = "report.html"


def write_result(result: VerifyResult, path: Path) -> Path:
    return write_atomically(path, result.model_dump_json(indent=2))


def read_result(path: Path) -> VerifyResult:
    return VerifyResult.model_validate_json(path.read_text(encoding="utf-8"))


def render_verify_report(result: VerifyResult, lang: str = "en") -> str:
    return render("verify.html.j2", check_lang(lang), r=result)


def write_verify_report(result: VerifyResult, path: Path, lang: str = "en") -> Path:
    return write_atomically(path, render_verify_report(result, lang))


def junit_xml(result: VerifyResult) -> str:
    suites = []
    for layer in result.layers:
        classname = f"embedperf.verify.layer{layer.number}"
        cases = [_case(classname, check.name, check.status, check.line) for check in layer.checks]
        if layer.status in ("skipped", "not_run", "incomplete"):
            cases.insert(0, _case(classname, layer.title, layer.status, layer.line))
        suites.append((f"layer {layer.number}: {layer.title}", cases))
    return junit_document("embedperf verify", suites)


def _case(classname: str, name: str, status: str, line: str) -> JUnitCase:
    if status in ("fail", "incomplete"):
        return JUnitCase(classname, name, "failure", line, "verify" if status == "fail" else "incomplete")
    if status in ("skipped", "not_run"):
        return JUnitCase(classname, name, "skipped", line)
    return JUnitCase(classname, name, "passed", f"{status.upper()}: {line}")


def write_junit(result: VerifyResult, path: Path) -> Path:
    return write_atomically(path, junit_xml(result))

"""`embedperf compare --json/--junit`: what a CI system reads, for a failing, a passing and a too-short gate."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from embedperf.cli import main as embedperf
from tests.golden.builders import stepped_run

REPO = Path(__file__).resolve().parents[3]
LOADS = [1, 5, 10]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ci")
    return {
        "base": stepped_run(root / "base", LOADS, 30.0, seed=1).root,
        "same": stepped_run(root / "same", LOADS, 30.0, seed=2).root,
        "dead": stepped_run(root / "dead", LOADS, 30.0, qps_per_user=300.0, refused=True).root,
        "short_a": stepped_run(root / "short_a", LOADS, 5.0, seed=3).root,
        "short_b": stepped_run(root / "short_b", LOADS, 5.0, seed=4).root,
    }


def _compare(
    tmp_path: Path, base: Path, cand: Path, gate: str = "qps:-3%,p99_ms:+50%"
) -> tuple[Path, Path, list[str]]:
    out_json, out_junit = tmp_path / "ci" / "gate.json", tmp_path / "ci" / "gate.xml"
    args = [
        "compare",
        str(base),
        str(cand),
        "--gate",
        gate,
        "--json",
        str(out_json),
        "--junit",
        str(out_junit),
    ]
    args += ["--out", str(tmp_path / "compare.html")]
    return out_json, out_junit, args


def _junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert suites and all(s.findall("testcase") for s in suites)
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests", "-1")) == len(cases)
        assert int(suite.get("failures", "-1")) == sum(1 for c in cases if c.find("failure") is not None)
        assert int(suite.get("skipped", "-1")) == sum(1 for c in cases if c.find("skipped") is not None)
        assert all(c.get("classname") and c.get("name") for c in cases)
    return root


def test_dead_target_fails_with_json_and_junit(folders, tmp_path, capsys) -> None:
    out_json, out_junit, args = _compare(tmp_path, folders["base"], folders["dead"])
    assert embedperf(args) == 1
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("embedperf compare: error: gate failed: dead: error_budget:1% at ")
    assert "100.000%" in last and "requests failed" in last
    data = json.loads(out_json.read_text())
    assert data["status"] == "fail" and data["exit_code"] == 1
    cand = data["candidates"][0]
    assert cand["status"] == "fail" and cand["failures"]
    assert all("\n" not in line for line in cand["failures"])
    root = _junit(out_junit)
    failures = root.findall("./testsuite/testcase/failure")
    names = {case.get("name") for case in root.iter("testcase") if case.find("failure") is not None}
    assert "error_budget:1% @ users=1" in names and "error_budget:1% @ users=10" in names
    assert all(
        "requests failed" in (f.get("message") or "") for f in failures if "error_budget" in (f.text or "")
    )
    assert int(root.get("failures", "0")) == len(failures) == len(LOADS)  # the error budget at each step


def test_healthy_pair_passes(folders, tmp_path, capsys) -> None:
    out_json, out_junit, args = _compare(tmp_path, folders["base"], folders["same"])
    assert embedperf(args) == 0
    assert json.loads(out_json.read_text())["status"] == "pass"
    root = _junit(out_junit)
    assert root.get("failures") == "0"
    # one case per rule and matched step, and the error budget at each step
    assert int(root.get("tests", "0")) == 2 * len(LOADS) + len(LOADS)


def test_too_short_gives_no_verdict_and_exit_2(folders, tmp_path, capsys) -> None:
    out_json, out_junit, args = _compare(tmp_path, folders["short_a"], folders["short_b"], gate="qps:-3%")
    assert embedperf(args) == 2
    err = capsys.readouterr().err
    assert "no verdict" in err and "s of steady state < 10 needed" in err
    data = json.loads(out_json.read_text())
    assert data["status"] == "no_verdict" and data["exit_code"] == 2
    assert data["candidates"][0]["warnings"]
    root = _junit(out_junit)
    assert root.findall("./testsuite/testcase/skipped")


def test_mismatched_loads_list_the_unmatched_steps(folders, tmp_path, capsys) -> None:
    out_json, out_junit, args = _compare(tmp_path, folders["base"], folders["short_a"])
    args[1:3] = [str(folders["base"]), str(stepped_run(tmp_path / "smoke", [1, 7], 30.0, seed=9).root)]
    assert embedperf(args) == 2
    cand = json.loads(out_json.read_text())["candidates"][0]
    assert "baseline step users=5 has no candidate step at the same load" in cand["unmatched"]
    assert "candidate step users=7 has no baseline step at the same load" in cand["unmatched"]
    root = _junit(out_junit)
    matching = [c for c in root.iter("testcase") if c.get("name") == "step matching (users/rate)"]
    assert len(matching) == 1 and matching[0].find("skipped") is not None


def test_make_compare_threads_json_and_junit() -> None:
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO), "compare", "BASE=runs/a", "CAND=runs/b", "GATE=qps:-3%",
         "JSON=ci/gate.json", "JUNIT=ci/gate.xml", f"STAMP={REPO / 'Makefile'}"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    line = dry.stdout.strip().splitlines()[-1]
    assert 'compare runs/a runs/b --gate "qps:-3%" --json "ci/gate.json" --junit "ci/gate.xml"' in line

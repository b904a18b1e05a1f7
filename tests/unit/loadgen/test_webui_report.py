"""The web UI's report link builds a finished run's report through the hook the locustfile registered:
loadgen imports nothing of reports/, and every locustfile hands it reports.live.build_run_report."""

from __future__ import annotations

import ast
from pathlib import Path

from embedperf.schema import RunFolder
from loadgen.recording.webui import report_response

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_a_finished_run_without_a_report_is_built_by_the_registered_builder(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run").create()
    built: list[RunFolder] = []

    def builder(run: RunFolder) -> Path:
        built.append(run)
        run.report.write_text("<html>built</html>", encoding="utf-8")
        return run.report

    assert report_response(folder, finished=False, build_report=builder).status_code == 409
    response = report_response(folder, finished=True, build_report=builder)
    assert (response.status_code, response.get_data(as_text=True)) == (200, "<html>built</html>")
    assert report_response(folder, finished=True, build_report=builder).status_code == 200
    assert built == [folder]  # once: the second request serves the file already there


def test_without_a_builder_an_existing_report_is_served_and_a_missing_one_says_what_to_do(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "run").create()
    missing = report_response(folder, finished=True)
    assert missing.status_code == 404 and "embedperf report" in missing.get_data(as_text=True)
    folder.report.write_text("<html>there</html>", encoding="utf-8")
    assert report_response(folder, finished=True).get_data(as_text=True) == "<html>there</html>"


def test_every_locustfile_registers_the_report_builder() -> None:
    for path in sorted((REPO_ROOT / "locustfiles").glob("*.py")):
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "install"
        ]
        assert calls, f"{path.name} does not call install"
        for call in calls:
            builder = {kw.arg: kw.value for kw in call.keywords}.get("report_builder")
            assert isinstance(builder, ast.Name) and builder.id == "build_run_report", path.name

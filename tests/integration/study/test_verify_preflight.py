"""`embedperf verify` refuses before measuring anything (exit 2): a target that does not answer, a start command
that dies before the service is ready, and thresholds that contradict each other."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from embedperf.cli import main
from tests.conftest import free_port


@pytest.mark.quick
def test_a_target_that_does_not_answer_stops_verify_in_the_preflight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "verify"
    assert main(["verify", "--host", f"http://127.0.0.1:{free_port()}", "--out", str(out)]) == 2
    assert "cannot reach the target" in capsys.readouterr().err
    assert not (out / "verify.json").exists()


def test_a_start_command_that_exits_is_a_preflight_error_with_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dies = f"{sys.executable} -c \"print('no model here'); raise SystemExit(3)\""
    host = f"http://127.0.0.1:{free_port()}"
    assert main(["verify", "--host", host, "--start-cmd", dies, "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert "the service exited with 3 before it was ready" in err and "no model here" in err


@pytest.mark.quick
def test_contradicting_thresholds_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = f"http://127.0.0.1:{free_port()}"
    assert main(["verify", "--host", host, "--set", "strict_cosine=0.9", "--out", str(tmp_path / "v")]) == 2
    assert "strict_cosine 0.9 is below min_cosine 0.99" in capsys.readouterr().err

"""A two-configuration matrix end to end: real services, real load, precision check, matrix report."""

from __future__ import annotations

import re
from pathlib import Path

from embedperf import cli
from embedperf.schema import open_run_folder, read_manifest, read_requests_table
from study.matrix.run import MatrixRecord

SPEC = """\
scenario: smoke
profile: quick
baseline: {batching: false, precision: fp32}
configurations:
  - name: baseline
    description: every request alone
  - name: int8-batched
    description: batching + int8
    service: {batching: true, max_batch_size: 16, precision: int8}
"""


def test_small_matrix_end_to_end(tmp_path: Path, capsys, monkeypatch) -> None:
    spec = tmp_path / "matrix.yaml"
    spec.write_text(SPEC)
    monkeypatch.chdir(tmp_path)  # a relative --runs-dir, as `make matrix` passes
    short = ["--set", "steps.duration_s=1.5", "--set", "steps.warmup_s=0.5"]  # rows, not figures, are checked
    code = cli.main(["matrix", str(spec), "--runs-dir", "runs", *short])
    out = capsys.readouterr().out
    assert code == 0, out
    folders = [p for p in (tmp_path / "runs").iterdir() if (p / "matrix.json").is_file()]
    assert len(folders) == 1
    record = MatrixRecord.read(folders[0])
    assert [r.config for r in record.runs] == ["baseline", "int8-batched"]
    assert all(r.ok for r in record.runs)
    assert record.runs[0].service_args == ["--no-batching", "--precision", "fp32"]
    # Each configuration ran in its own service with the asked-for settings.
    for run in record.runs:
        run_folder = open_run_folder(folders[0] / str(run.run_dir))
        manifest = read_manifest(run_folder)
        assert manifest.complete
        assert manifest.service_info is not None and manifest.service_info.config is not None
        config = manifest.service_info.config
        assert config["batching"] is (run.config != "baseline")
        assert read_requests_table(run_folder).num_rows > 0
    # The int8 configuration was checked for precision; fp32 is the reference and is not.
    assert set(record.precision) == {"int8-batched"}
    assert 0.9 < record.precision["int8-batched"]["cosine_mean"] < 1.0
    html = (folders[0] / "matrix.html").read_text()
    assert "int8-batched" in html and "Recommendation" in html
    # int8 on every Linear layer of MiniLM is below the 0.99 gate: shown, never recommended.
    assert record.precision["int8-batched"]["passed"] is False
    recommendation = re.search(r"<h2>Recommendation</h2>\s*<p><b>(.*?)</b>", html, re.S)
    assert recommendation is not None and "int8-batched" not in recommendation.group(1)
    assert "Failed the precision gate, so never recommended: int8-batched." in html

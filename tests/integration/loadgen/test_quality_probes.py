"""Quality probes catch a target whose answers go wrong only under load."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import yaml

from analysis.compare.quality_gate import quality_gate
from analysis.run.analyse import analyse_folder
from embedperf.schema import read_requests_table
from loadgen.cli.runner import run_scenario
from loadgen.processes.stub_target import running_stub, text_vector
from loadgen.traffic.quality import write_reference_set
from reports.build import build_report

DIM = 8
TEXTS = [f"reference passage number {i} about vector search" for i in range(12)]


def test_probes_flag_the_step_where_vectors_are_corrupted(tmp_path: Path) -> None:
    # the stub scrambles vectors while more than 2 requests are in flight: 1 user is fine, 6 are not
    write_reference_set(
        tmp_path / "ref.parquet", TEXTS, np.array([text_vector(t, DIM) for t in TEXTS]), "stub"
    )
    scenario = {
        "name": "probes",
        "kind": "ramp",
        "payload": {"quality_probes": {"fraction": 0.5, "reference": "ref.parquet", "min_cosine": 0.99}},
        "steps": [
            {"label": "u1", "users": 1, "duration_s": 2.5, "warmup_s": 0.5},
            {"label": "u6", "users": 6, "duration_s": 2.5, "warmup_s": 0.5},
        ],
    }
    (tmp_path / "probes.yaml").write_text(yaml.safe_dump(scenario), "utf-8")
    with running_stub("--delay-ms", "40", "--dim", str(DIM), "--corrupt-above", "2") as url:
        folder = run_scenario(
            str(tmp_path / "probes.yaml"),
            host=url,
            runs_dir=tmp_path / "runs",
            collectors=False,
            timeout_s=120,
        )
    rows = read_requests_table(folder, ["stage_index", "ok", "probe_cosine"]).to_pylist()
    probes = [r for r in rows if r["probe_cosine"] is not None]
    assert probes and len(probes) < len(rows)  # a fraction of the requests, each with its cosine
    analysis = analyse_folder(folder)
    gate = quality_gate(analysis.summary, analysis.manifest)
    assert gate is not None
    by_label = {s.label: s for s in gate.steps}
    assert by_label["u1"].cosine_min > 0.999 and not by_label["u1"].below_gate
    assert by_label["u6"].below_gate and by_label["u6"].cosine_min < 0.5
    assert gate.failed == ["u6"]
    report = html.unescape(build_report(folder).read_text(encoding="utf-8"))
    assert "quality-below-gate" in report and "Embedding quality below the gate in: u6" in report

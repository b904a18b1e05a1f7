"""`embedperf canary` end to end: the reference service promotes itself and rolls back a candidate whose
answers are int8's; a canary from two workers promotes; a candidate that fails requests from the 20%
stage on, and one three times slower, are rolled back.

Short windows (3 s, 2 per stage) on the `smoke` scenario (closed loop) sending one text per request;
thresholds that suit so few requests are passed as flags, and a fifth of the requests are agreement
samples (which also gives the 5% stage enough candidate requests to judge on a busy host). The failing
and the slow candidate are a proxy in front of the stub server (a fixed 100 ms per answer, the same
vector for every text): their triggers read error rates and P99s, which a fixed answer time makes exact,
and the stub leaves the host's cores to the other tests where the reference service would compute for
as long as the canary runs. The distributed canary runs on the stub too: it checks how the stages'
weights reach every worker, not the answers. Each test watches canary.json (the canary's live status)
instead of sleeping.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from embedperf.canary_record import CanaryRecord, read_canary_record
from loadgen.processes.service_proc import RAMP_SERVICE_ARGS, ServiceProcess
from loadgen.processes.stub_target import running_stub
from tests.conftest import REPO_ROOT, SERVICE_READY_TIMEOUT_S
from tests.fakes.canary_proxy import candidate_proxy

EMBEDPERF = [sys.executable, "-m", "embedperf.cli"]
WINDOWS_PER_STAGE = 2
STUB_DELAY_MS = 100.0
# 40 req/s against the stub, over a hundred per window; passed after SHORT, so this --set replaces its 16 users
STUB_USERS = ["--set", "steps.users=4"]
SHORT = [
    "smoke",
    "--set", "payload.inputs_per_request=[{n: 1, weight: 1}]",
    "--set", "steps.users=16",
    "--window-s", "3",
    "--windows-per-stage", str(WINDOWS_PER_STAGE),
    "--min-window-requests", "5",
    "--min-stage-requests", "5",
    "--agreement-fraction", "0.2",
    "--no-collectors",
]  # fmt: skip
RUN_LIMIT_S = 240.0  # a safety stop for a hung child, never a timing assertion


def run_canary(
    tmp_path: Path,
    baseline: str,
    candidate: str,
    *flags: str,
    report: bool = False,
    on_stage: Callable[[int], None] | None = None,
) -> tuple[int, CanaryRecord, Path, str]:
    """Run `embedperf canary` to its end; `on_stage(i)` is called as canary.json says stage i is under way.

    report.html is built only where a test reads it (`report`); canary.json and the JUnit file always."""
    runs = tmp_path / "runs"
    cmd = [
        *EMBEDPERF,
        "canary",
        *SHORT,
        "--baseline",
        baseline,
        "--candidate",
        candidate,
        "--runs-dir",
        str(runs),
    ]
    cmd += ["--json", str(tmp_path / "canary.json"), "--junit", str(tmp_path / "canary.xml"), *flags]
    cmd += [] if report else ["--no-report"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = -1
    deadline = time.monotonic() + RUN_LIMIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        if on_stage is not None:
            seen = _announce_stage(runs, seen, on_stage)
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    output = proc.communicate()[0]
    folders = [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
    assert len(folders) == 1, output
    record = read_canary_record(folders[0])
    assert record is not None, output
    return proc.returncode, record, folders[0], output


def _announce_stage(runs: Path, seen: int, on_stage: Callable[[int], None]) -> int:
    for folder in runs.glob("*/") if runs.is_dir() else []:
        try:
            record = read_canary_record(folder)
        except Exception:  # noqa: BLE001 - a file being replaced reads next time
            return seen
        if (
            record is not None
            and record.running_stage_index is not None
            and record.running_stage_index > seen
        ):
            on_stage(record.running_stage_index)
            return record.running_stage_index
    return seen


@pytest.fixture(scope="module")
def stub_service() -> Iterator[str]:
    with running_stub("--delay-ms", str(STUB_DELAY_MS)) as url:
        yield url


@pytest.fixture(scope="module")
def int8_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log_path = tmp_path_factory.mktemp("int8") / "service.log"
    with ServiceProcess(
        ["--precision", "int8", *RAMP_SERVICE_ARGS],
        log_path=log_path,
        ready_timeout_s=SERVICE_READY_TIMEOUT_S,
    ) as service:
        yield service.url


def test_the_reference_service_against_itself_promotes_with_agreement_at_every_stage(
    reference_service: str, tmp_path: Path
) -> None:
    # the same service on both sides: only a P99 three times the baseline's is taken for a slow candidate
    code, record, folder, output = run_canary(
        tmp_path, reference_service, reference_service, "--max-p99-increase-pct", "200", "--allow-same-target",
        report=True,
    )  # fmt: skip
    assert code == 0, output
    assert record.status == "promote" and record.line.startswith("PROMOTE"), record.line
    assert f"canary: {record.line}" in output
    stages = {w.stage_index for w in record.windows}
    assert stages == {0, 1, 2, 3} and len(record.windows) == 4 * WINDOWS_PER_STAGE
    for index in stages:
        windows = [w for w in record.windows if w.stage_index == index]
        assert sum(w.agreement_n for w in windows) > 0, f"no agreement sample at stage {index + 1}"
        assert min(w.agreement_min for w in windows if w.agreement_min is not None) >= 0.9999
    # the rows: both sides, each stage's candidate share near its weight (the draws are per request)
    rows = pq.read_table(folder / "requests.parquet", columns=["stage_index", "side", "agreement_cosine"])
    table = rows.to_pandas()
    first = table[table["agreement_cosine"].isna()]  # the second request of a pair goes to the other side
    share = first.groupby("stage_index")["side"].apply(lambda s: (s == "candidate").mean())
    assert share[0] < share[1] < share[2] < share[3] and share[3] > 0.95
    assert set(table["side"].dropna()) == {"baseline", "candidate"}
    verdict = json.loads((tmp_path / "canary.json").read_text())
    assert verdict["status"] == "promote" and verdict["exit_code"] == 0
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert 'id="canary-verdict"' in html and "PROMOTE" in html and 'id="canary-windows"' in html
    assert "PROMOTE: PROMOTE" not in html and html.count("PROMOTE") >= 1
    assert html.index('id="canary"') < html.index('id="headline"')  # the canary's verdict opens the report


def test_a_distributed_canary_sends_each_stage_weight_from_every_worker_and_promotes(
    stub_service: str, tmp_path: Path
) -> None:
    # a master and 2 local workers: the workers learn each stage's weight by message, the master judges
    # the windows from the rows they forward (the stub on both sides: what is checked is the traffic split)
    code, record, folder, output = run_canary(
        tmp_path, stub_service, stub_service, "--max-p99-increase-pct", "200", "--allow-same-target",
        "--workers", "2", "--stages", "5,100", *STUB_USERS,
    )  # fmt: skip
    assert code == 0, output
    assert record.status == "promote", record.line
    assert {w.stage_index for w in record.windows} == {0, 1}
    assert len(record.windows) == 2 * WINDOWS_PER_STAGE
    table = pq.read_table(folder / "requests.parquet", columns=["worker", "stage_index", "side"]).to_pandas()
    assert table["worker"].nunique() == 2, table["worker"].unique()
    for worker, rows in table.groupby("worker"):
        share = rows.groupby("stage_index")["side"].apply(lambda s: (s == "candidate").mean())
        assert share[0] < 0.5 < share[1], (worker, share.to_dict())  # every worker followed the stages
    assert sum(w.agreement_n for w in record.windows) > 0


def test_a_candidate_failing_5pct_from_the_20pct_stage_is_rolled_back_at_that_stage(
    stub_service: str, tmp_path: Path
) -> None:
    with candidate_proxy(stub_service) as (url, proxy):

        def switch(stage: int) -> None:
            if stage >= 1 and not proxy.fail_every:
                proxy.start_failing(20)

        code, record, folder, output = run_canary(
            tmp_path, stub_service, url, "--max-p99-increase-pct", "off", *STUB_USERS, on_stage=switch
        )
    assert code == 1, output
    assert record.status == "rollback" and record.trigger == "error_rate"
    assert (
        record.stage_index == 1
        and record.window_index is not None
        and record.window_index < WINDOWS_PER_STAGE
    )
    assert re.fullmatch(
        r"ROLL BACK at stage 2 \(20%\), window [12]: candidate error rate \d+\.\d% > 1% \(\d+ of \d+; baseline 0\.0%\)",
        record.line,
    ), record.line
    assert record.line in output
    manifest = json.loads((folder / "manifest.json").read_text())
    assert max(stage["index"] for stage in manifest["stages"]) == 1  # no further stage started
    assert proxy.failed > 0
    junit = (tmp_path / "canary.xml").read_text()
    assert 'name="error_rate @ 20%"' in junit and "<failure" in junit


def test_an_int8_candidate_is_rolled_back_on_answer_agreement(
    reference_service: str, int8_service: str, tmp_path: Path
) -> None:
    code, record, _, output = run_canary(tmp_path, reference_service, int8_service)
    assert code == 1, output
    assert record.status == "rollback" and record.trigger == "agreement", record.line
    fired = record.windows[-1]
    assert fired.agreement_mean is not None and fired.agreement_mean < 0.99
    assert "agreement cosine 0.9" in record.line and "< 0.99" in record.line


def test_a_candidate_three_times_slower_is_rolled_back_on_p99_after_n_consecutive_windows(
    stub_service: str, tmp_path: Path
) -> None:
    n = 2
    with candidate_proxy(stub_service) as (url, proxy):
        proxy.slow_factor = 3.0
        code, record, folder, output = run_canary(
            tmp_path, stub_service, url, "--p99-windows", str(n), "--max-p99-increase-pct", "50", *STUB_USERS
        )
    assert code == 1, output
    assert record.status == "rollback" and record.trigger == "p99_increase", record.line
    fired = record.windows[-1]
    assert (fired.stage_index, fired.window_index) == (record.stage_index, record.window_index)
    assert fired.p99_over and fired.p99_streak == n  # the n-th window over the limit ...
    before = record.windows[-2]
    assert (
        before.p99_over and before.p99_streak == n - 1
    )  # ... and the one before it was over too, yet no stop
    assert f"in {n} consecutive windows" in record.line
    # a stage is held until its last window is judged: no stage after the one that fired started
    manifest = json.loads((folder / "manifest.json").read_text())
    assert max(stage["index"] for stage in manifest["stages"]) == record.stage_index, manifest["stages"]

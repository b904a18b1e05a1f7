"""`embedperf search` exit codes: from the search's record (0 answer, 1 no rate, 4 not narrowed, 3 unfinished),
and a pre-flight refusal (2) before any probe when the probes could never bound a P99."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import study.bench.search as search_cli
from analysis.cli.synth import synthesize
from decisions.search.state import SearchRecord
from embedperf.cli import main
from embedperf.schema import Manifest, RunFolder, read_manifest, write_manifest


def _record(status: str, answer_rps: float | None) -> SearchRecord:
    return SearchRecord(
        rule="r",
        slo_p99_ms=60.0,
        error_budget_pct=0.1,
        precision=0.05,
        confidence=0.95,
        arrival="poisson",
        status=status,  # type: ignore[arg-type]
        answer_rps=answer_rps,
        uncertainty_rps=(answer_rps, None if answer_rps is None else answer_rps * 1.04),
        note="n",
    )


class FakeSearch:
    """Stands in for run_scenario: writes a run folder whose manifest carries the queued record."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.queued: list[SearchRecord | None] = []
        self.calls = 0

    def append(self, record: SearchRecord | None) -> None:
        self.queued.append(record)

    def __call__(self, *_: Any, **__: Any) -> RunFolder:
        self.calls += 1
        folder = synthesize(self.tmp_path / f"run{self.calls}", n_requests=300, n_devices=1, hours=0.01)
        record = self.queued.pop(0)
        if record is not None:
            raw = read_manifest(folder).model_dump(mode="json") | {"search": record.model_dump(mode="json")}
            write_manifest(folder, Manifest.model_validate(raw))
        return folder


@pytest.fixture
def fake_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSearch:
    fake = FakeSearch(tmp_path)
    monkeypatch.setattr(search_cli, "run_scenario", fake)
    return fake


@pytest.mark.parametrize(
    ("status", "answer", "code"),
    [
        ("found", 135.0, 0),
        ("at_slo", 135.0, 0),
        ("above_max_rate", 400.0, 0),
        ("below_min_rate", None, 1),
        ("wide_interval", 95.0, 4),
        ("unconfirmed", 120.0, 4),
        ("max_duration", 120.0, 4),
        ("uncertain", 120.0, 4),  # written by older searches
    ],
)
def test_exit_code_follows_the_searched_answer(
    fake_search: FakeSearch, status: str, answer: float | None, code: int
) -> None:
    fake_search.append(_record(status, answer))
    assert main(["search", "--no-report", "--host", "http://127.0.0.1:9"]) == code


def test_a_search_that_did_not_finish_exits_3(
    fake_search: FakeSearch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_search.append(None)
    assert main(["search", "--no-report", "--host", "http://127.0.0.1:9"]) == 3
    assert "the search did not finish" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--min-ok-requests", "150"], "search.min_ok_requests 150 can never bound a P99"),
        (["--max-rate", "10", "--start-rate", "5"], "search.max_rate 10 req/s is below 19.5 req/s"),
    ],
)
def test_probes_that_could_never_bound_a_p99_are_refused_before_any_run(
    fake_search: FakeSearch, capsys: pytest.CaptureFixture[str], flags: list[str], words: str
) -> None:
    assert main(["search", "--no-report", "--host", "http://127.0.0.1:9", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert fake_search.calls == 0  # refused before the run


def test_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        search_cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code, meaning in (
        ("0", "an answer within --precision"),
        ("1", "no probed rate meets the SLO"),
        ("2", "usage or pre-flight error"),
        ("3", "the search did not finish"),
        ("4", "no answer to --precision"),
    ):
        assert f"{code} {meaning}" in text

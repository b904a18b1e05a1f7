"""A zh report says the comparison's failure lines, gate reasons and collector reasons in Chinese."""

from __future__ import annotations

import re
from pathlib import Path

from analysis.compare.changes import CandidateComparison, StepComparison, _change
from analysis.compare.gate import BudgetScope, evaluate_gate, parse_gate
from analysis.compare.reasons import reason
from collectors.config import CollectorConfig
from collectors.npu_smi import NpuSmiSource
from reports.compare_text import change_warning, failure_lines, gate_reason
from reports.i18n import reason_text

# two English words in a row: what is left untranslated (flags, paths and numbers do not match)
ENGLISH = re.compile(r"\b[a-z]{3,} [a-z]{3,}\b")


def _candidate() -> CandidateComparison:
    short = _change("qps", 70.7, 7.0, (-71.0, -54.2), reason("short_steady", have=4.6, need=10))
    slow = _change("p99_ms", 100.0, 200.0, (50.0, 150.0))
    step = StepComparison(
        index=1, label="u10", base_load=10.0, cand_load=10.0, metrics={"qps": short, "p99_ms": slow},
        base_n_ok=500, cand_n_ok=500,
    )  # fmt: skip
    gate = evaluate_gate(
        parse_gate("qps:-3%,p99_ms:+5%"), [step], [BudgetScope(label="u10", n_requests=80, n_failed=10)], 0.001
    )
    empty = StepComparison(index=1, label="u10", base_load=None, cand_load=None, metrics={}, base_n_ok=0, cand_n_ok=0)
    return CandidateComparison(
        run_id="c", label="c", steps=[step], overall=empty, mismatches=[], error_budget=0.001, gate=gate
    )


def test_failure_lines_and_gate_reasons_are_chinese_in_zh_and_unchanged_in_en() -> None:
    cand = _candidate()
    assert failure_lines(cand, "en") == cand.failures  # the console and JSON say the same in English
    assert "whatever its speed" in cand.failures[0]
    zh = failure_lines(cand, "zh")
    assert len(zh) == 2 and "候选错误率 12.500%" in zh[0] and "规则 p99_ms:+5%" in zh[1]
    assert not any(ENGLISH.search(line) for line in zh), zh
    reasons = [gate_reason(g, "zh") for g in cand.gate]
    assert any("稳态仅 4.6 秒" in r for r in reasons) and not any(ENGLISH.search(r) for r in reasons), reasons
    assert change_warning(cand.steps[0].metrics["qps"], "zh") == "稳态仅 4.6 秒 < 所需 10 秒"


def test_a_collector_reason_is_chinese_in_zh(tmp_path: Path) -> None:
    reason_en = NpuSmiSource(CollectorConfig(out_dir=tmp_path, npu_smi="/nonexistent/npu-smi")).probe()
    assert reason_en is not None and "drop the npu_smi source" in reason_en
    zh = reason_text(reason_en, "zh")
    assert not ENGLISH.search(zh), zh

"""Every report label has both languages: keys used by templates and report code, and the search's codes."""

from __future__ import annotations

import re
import tomllib
import typing
from pathlib import Path

import reports
from analysis.compare.reasons import REASONS as COMPARE_REASONS
from decisions.search.state import NOTES, REASONS, Phase, SearchStatus, Verdict
from reports.i18n import CATALOGUE, REASON_PHRASES, VERDICT_TEXT

ROOT = Path(reports.__file__).parent
LITERAL = re.compile(r"""\b_\(\s*'([A-Za-z0-9_/]+)'\s*[,)]""")
DYNAMIC = re.compile(r"""\b_\(\s*'([A-Za-z0-9_]+)'\s*~""")
PY_LITERAL = re.compile(r"""\bt\(\s*"([A-Za-z0-9_]+)"\s*[,)]""")
PY_DYNAMIC = re.compile(r"""\bt\(\s*f"([A-Za-z0-9_]+)\{""")


def _templates() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "templates").glob("*.j2")))


def _code() -> str:
    files = [*ROOT.glob("*.py"), *(ROOT.parent / "study").glob("matrix*.py")]
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(files))


def _both(key: str) -> bool:
    pair = CATALOGUE.get(key)
    return pair is not None and bool(pair[0]) and bool(pair[1])


def test_every_key_a_template_or_report_code_names_has_both_languages() -> None:
    literal = set(LITERAL.findall(_templates())) | set(PY_LITERAL.findall(_code()))
    assert len(literal) > 150  # the walk found the templates' keys
    assert {k for k in literal if not _both(k)} == set()
    prefixes = set(DYNAMIC.findall(_templates())) | set(PY_DYNAMIC.findall(_code()))
    assert {"sst_", "sr_", "sv_", "ph_", "m_", "kind_", "src_"} <= prefixes
    assert {p for p in prefixes if not any(k.startswith(p) for k in CATALOGUE)} == set()


def test_every_search_phase_verdict_status_reason_and_note_is_translated() -> None:
    wanted = (
        [f"ph_{p}" for p in typing.get_args(Phase)]
        + [f"sv_{v}" for v in typing.get_args(Verdict)]
        + [f"sst_{s}" for s in typing.get_args(SearchStatus)]
        + [f"sr_{code}" for code in REASONS]
        + [f"sn_{s}" for s, text in NOTES.items() if text]
    )
    assert [k for k in wanted if not _both(k)] == []
    # the English of a reason or note is the text the manifest and the console carry
    assert {code: CATALOGUE[f"sr_{code}"][0] for code in REASONS} == REASONS
    assert {s: CATALOGUE[f"sn_{s}"][0] for s, text in NOTES.items() if text} == {
        s: text for s, text in NOTES.items() if text
    }


def test_the_chinese_of_every_key_uses_the_same_parameters() -> None:
    names = re.compile(r"\{(\w+)")
    assert [k for k, (en, zh) in CATALOGUE.items() if set(names.findall(en)) != set(names.findall(zh))] == []


def test_every_key_of_the_catalogue_file_is_loaded_with_two_texts() -> None:
    text = (ROOT / "templates" / "i18n.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    keys = [line for line in text.splitlines() if re.match(r'^("[^"]+"|[\w+-]+) = ', line)]
    assert len(keys) == sum(len(table) for table in data.values()) == 641
    assert len(REASON_PHRASES) == len(data["reason_phrases"]) == 21
    assert len(VERDICT_TEXT) == len(data["verdicts"]) == 11
    # the file's strings, the verdict words under 8 report keys, the comparison's reasons (cr_<code>)
    assert len(CATALOGUE) == len(data["strings"]) + 8 + len(COMPARE_REASONS) == 617
    assert all(isinstance(en, str) and isinstance(zh, str) for en, zh in CATALOGUE.values())

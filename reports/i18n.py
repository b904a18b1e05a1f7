"""Every user-visible string of the reports, in English and Chinese. Templates and figures look up keys here.

The strings themselves are data, in reports/templates/i18n.toml (key = [English, Chinese]); this module
loads them once and adds the keys whose texts are defined elsewhere: the verdict words under their
report keys, and the comparison's reasons, whose English is analysis/compare/reasons.py's own text.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from analysis.compare.reasons import REASONS

_DATA: dict[str, dict[str, Any]] = tomllib.loads(
    (Path(__file__).parent / "templates" / "i18n.toml").read_text(encoding="utf-8")
)


def _pairs(table: dict[str, list[str]]) -> dict[str, tuple[str, str]]:
    return {key: (en, zh) for key, (en, zh) in table.items()}


# The product's verdict words (embedperf/verdicts.py's Literal types), in both languages.
VERDICT_TEXT: dict[str, tuple[str, str]] = _pairs(_DATA["verdicts"])
# key -> (English, Chinese). Parameters use str.format names.
CATALOGUE: dict[str, tuple[str, str]] = {
    **_pairs(_DATA["strings"]),
    **{word: VERDICT_TEXT[word] for word in ("better", "worse", "no_difference", "no_verdict")},
    **{f"sv_{word}": VERDICT_TEXT[word] for word in ("pass", "fail", "uncertain", "no_verdict")},
    **{f"cr_{code}": (text, _DATA["compare_reasons_zh"][code]) for code, text in REASONS.items()},
}
# Known English phrases of the collectors' and agents' reasons -> Chinese.
REASON_PHRASES: dict[str, str] = _DATA["reason_phrases"]


def reason_text(reason: str, lang: str) -> str:
    """A source's reason in lang: known phrases translated, paths and error text kept."""
    if lang != "zh":
        return reason
    for phrase, zh in REASON_PHRASES.items():
        reason = reason.replace(phrase, zh)
    return reason


def error_kind_text(kind: str, lang: str) -> str:
    """connection_refused -> "connection refused"; http_503 -> "HTTP 503"."""
    if kind.startswith("http_"):
        return t("ek_http", lang, code=kind[5:])
    return t(f"ek_{kind}", lang) if f"ek_{kind}" in CATALOGUE else kind


def t(key: str, lang: str = "en", **params: Any) -> str:
    """The string for key in lang (English if lang is unknown), formatted with params."""
    pair = CATALOGUE.get(key)
    if pair is None:
        return key
    text = pair[1] if lang == "zh" else pair[0]
    if params:
        try:
            return text.format(**{k: ("—" if v is None else v) for k, v in params.items()})
        except (KeyError, IndexError, ValueError):
            return text
    return text

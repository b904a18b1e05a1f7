"""The jinja2 environment shared by run and comparison reports: autoescape on, number formatting, i18n."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache, partial
from typing import Any

import jinja2
from pydantic import BaseModel

from reports.i18n import t
from reports.view import field

MISSING = "n/a"  # an empty cell; a compound cell with nothing measured is one n/a, never "— / —%"


def num(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return MISSING
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    if f != f:  # NaN
        return MISSING
    return f"{f:,.{digits}f}"


def pct(fraction: float | None, digits: int = 3) -> str:
    """A fraction as a percentage (0.0012 -> 0.120%)."""
    if fraction is None:
        return MISSING
    return f"{fraction * 100:.{digits}f}%"


def pair(first: str, second: str, unit: str = "", sep: str = " / ") -> str:
    """Two formatted figures in one cell (mean / max, an interval); one n/a when neither was measured."""
    if first == MISSING and second == MISSING:
        return MISSING
    return f"{first}{sep}{second}{unit if second != MISSING else ''}"


def signed_pct(fraction: float | None, digits: int = 1) -> str:
    if fraction is None:
        return MISSING
    return f"{fraction * 100:+.{digits}f}%"


def utc(ts: float | None) -> str:
    if ts is None:
        return MISSING
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def kv(mapping: Any) -> str:
    """A flat, readable rendering of a small dict (autoescaped by the template)."""
    if isinstance(mapping, BaseModel):
        mapping = mapping.model_dump(exclude_none=True, exclude_defaults=True)
    if not mapping:
        return MISSING
    if hasattr(mapping, "model_dump"):
        mapping = {k: v for k, v in mapping.model_dump().items() if v not in (None, "", [], {})}
        if not mapping:
            return MISSING
    if not isinstance(mapping, dict):
        return str(mapping)
    return ", ".join(f"{k}={kv(v) if isinstance(v, dict) else v}" for k, v in mapping.items())


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process: it compiles each template once (~0.1 s each) and keeps it."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        num=num, pct=pct, pair=pair, na=MISSING, signed_pct=signed_pct, utc=utc, kv=kv, get=field
    )
    return env


def render(template: str, lang: str, **context: Any) -> str:
    env = environment()
    return env.get_template(template).render(lang=lang, _=partial(t, lang=lang), **context)

"""The jinja2 environment shared by run and comparison reports: autoescape on, number formatting, i18n."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import lru_cache, partial
from typing import Any

import jinja2
import jinja2.bccache
from pydantic import BaseModel

from embedperf.cache_folder import cache_dir
from reports.i18n import t
from reports.view import field

log = logging.getLogger("reports.render")

MISSING = "n/a"  # an empty cell; a compound cell with nothing measured is one n/a, never "— / —%"


def num(value: float | int | None, digits: int = 2) -> str:
    """A figure with thousands separators; n/a when absent or NaN, a value that is no number as is."""
    if value is None:
        return MISSING
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return MISSING if f != f else f"{f:,.{digits}f}"  # f != f: NaN


def pct(fraction: float | None, digits: int = 3, sign: str = "") -> str:
    """A fraction as a percentage (0.0012 -> 0.120%); sign "+" writes the sign of a change."""
    return MISSING if fraction is None else f"{fraction * 100:{sign}.{digits}f}%"


def pair(first: str, second: str, unit: str = "", sep: str = " / ") -> str:
    """Two formatted figures in one cell (mean / max, an interval); one n/a when neither was measured."""
    if first == MISSING and second == MISSING:
        return MISSING
    return f"{first}{sep}{second}{unit if second != MISSING else ''}"


def signed_pct(fraction: float | None, digits: int = 1) -> str:
    return pct(fraction, digits, "+")


def utc(ts: float | None) -> str:
    return MISSING if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def kv(mapping: Any) -> str:
    """A flat, readable rendering of a small dict (autoescaped by the template)."""
    if isinstance(mapping, BaseModel):
        mapping = mapping.model_dump(exclude_none=True, exclude_defaults=True)
    if not mapping:
        return MISSING
    if not isinstance(mapping, dict):
        return str(mapping)
    return ", ".join(f"{k}={kv(v) if isinstance(v, dict) else v}" for k, v in mapping.items())


class BestEffortBytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file cache, except that a compiled template that cannot be written is not kept instead
    of failing the report."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError as exc:
            log.debug("compiled template not kept in %s: %s", self.directory, exc)


def bytecode_cache() -> jinja2.FileSystemBytecodeCache | None:
    """The templates compiled to bytecode in the cache folder's `jinja/`, so a process that renders a
    report skips compiling them (~0.3 s of CPU a run report). jinja2 keys each entry by the template's
    source and the Python version, so an edited template is compiled afresh; with the cache folder off,
    or one that cannot be made, templates are compiled in every process."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        (directory / "jinja").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.debug("no template cache in %s: %s", directory, exc)
        return None
    return BestEffortBytecodeCache(str(directory / "jinja"))


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process: it compiles each template once, or reads it from the bytecode cache."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"), bytecode_cache=bytecode_cache(), autoescape=True,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )  # fmt: skip
    env.globals.update(
        num=num, pct=pct, pair=pair, na=MISSING, signed_pct=signed_pct, utc=utc, kv=kv, get=field
    )
    return env


def render(template: str, lang: str, **context: Any) -> str:
    return environment().get_template(template).render(lang=lang, _=partial(t, lang=lang), **context)

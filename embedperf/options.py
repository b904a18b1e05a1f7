"""Options several commands share: one spelling, one unit, one help text, in one table.

Every command's parser adds these through `add_shared_option`, so `capacity`, `compare`, `search` and
`verify` cannot drift apart again (a fraction in one, a percentage in the next). A spelling retired for
the table's is still accepted, converted to the table's unit, with a one-line deprecation warning on
stderr. README's "Options shared by the commands" table is checked against this one
(tests/unit/embedperf/test_shared_options.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LANGS: tuple[str, ...] = ("en", "zh")


@dataclass(frozen=True)
class Retired:
    """An old spelling: its flag and how its value becomes the table's unit."""

    flag: str
    unit: str
    to_current: Callable[[float], float]


@dataclass(frozen=True)
class SharedOption:
    flag: str
    unit: str  # what the number means ("" for a word or a path)
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] = float
    choices: Sequence[str] | None = None
    retired: tuple[Retired, ...] = field(default=())

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


def _number(text: str, what: str = "a number") -> float:
    try:
        return float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from exc


def _percent(text: str) -> float:
    value = _number(text, "a number of percent (e.g. 0.1)")
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"{text} is not a percentage between 0 and 100")
    return value


def _percent_below_100(text: str) -> float:
    value = _percent(text)
    if value >= 100.0:
        raise argparse.ArgumentTypeError(f"{text}: headroom must be below 100%")
    return value


def _positive(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return value


def _fraction_to_pct(value: float) -> float:
    return value * 100.0


SHARED_OPTIONS: dict[str, SharedOption] = {
    "slo_p99_ms": SharedOption("--slo-p99-ms", "ms", "P99 latency objective in ms", "MS", _positive),
    "error_budget_pct": SharedOption(
        "--error-budget-pct",
        "%",
        "error budget: the share of requests allowed to fail, in percent (0.1 = one in a thousand)",
        "PCT",
        _percent,
        retired=(Retired("--error-budget", "fraction", _fraction_to_pct),),
    ),
    "target_qps": SharedOption(
        "--target-qps", "req/s", "rate the deployment must serve, in requests per second", "QPS", _positive
    ),
    "headroom_pct": SharedOption(
        "--headroom-pct",
        "%",
        "capacity kept spare above --target-qps, in percent (25 = plan for 1.25 x the target)",
        "PCT",
        _percent_below_100,
        retired=(Retired("--headroom", "fraction", _fraction_to_pct),),
    ),
    "lang": SharedOption("--lang", "", "language of the report", None, str, LANGS),
    "runs_dir": SharedOption("--runs-dir", "", "folder the run folders live in", "DIR", Path),
}


class _RetiredFlag(argparse.Action):
    """An old spelling: converts its value to the table's unit and says once which flag replaces it."""

    def __init__(self, option_strings: list[str], dest: str, retired: Retired, current: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, **kw)
        self.retired = retired
        self.current = current

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        old = self.retired
        converted = old.to_current(float(values))
        warning = f"{old.flag} ({old.unit}) is deprecated; use {self.current} {converted:g}"
        print(f"{parser.prog}: warning: {warning}", file=sys.stderr)
        setattr(namespace, self.dest, converted)


def add_shared_option(parser: Any, key: str, default: Any = None, default_text: str | None = None) -> argparse.Action:
    """Add the table's option `key` to an argparse parser or group (Locust's too). default: the value when the
    flag is absent (in the table's unit); default_text: what the help says about it when that is not the value
    itself (e.g. "the scenario's slo.p99_ms")."""
    opt = SHARED_OPTIONS[key]
    if default_text is None and default is not None:
        default_text = f"{default:g}" if isinstance(default, float) else str(default)
    text = opt.help + (f" (default: {default_text})" if default_text else "")
    kwargs: dict[str, Any] = {"type": opt.type, "default": default, "help": text.replace("%", "%%")}
    if opt.choices is not None:
        kwargs["choices"] = list(opt.choices)
    if opt.metavar is not None:
        kwargs["metavar"] = opt.metavar
    action: argparse.Action = parser.add_argument(opt.flag, **kwargs)
    for old in opt.retired:
        parser.add_argument(
            old.flag,
            dest=opt.dest,
            action=_RetiredFlag,
            retired=old,
            current=opt.flag,
            metavar=old.unit.upper(),
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )
    return action


def readme_rows() -> list[str]:
    """The README's table of shared options, one Markdown row per option."""
    rows = []
    for opt in SHARED_OPTIONS.values():
        unit = opt.unit or ("one of " + ", ".join(opt.choices) if opt.choices else "path")
        old = ", ".join(f"`{r.flag}` ({r.unit})" for r in opt.retired) or "none"
        rows.append(f"| `{opt.flag}` | {unit} | {opt.help} | {old} |")
    return rows

"""The `--cost-*` options: prices given to `embedperf run` (recorded as the scenario's cost block) or, after
the fact, to `report`, `capacity` and `compare` (laid over the recorded prices, see scenarios.cost_models)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from embedperf.errors import ConfigError
from scenarios.cost_models import DEFAULT_CURRENCY, DEVICE_KINDS, Cost


def add_cost_options(parser: argparse._ActionsContainer, after_the_fact: bool = False) -> None:
    """--cost-device-hour KIND=PRICE (repeatable), --cost-host-hour, --cost-energy-kwh, --currency."""
    where = (
        "replaces the run's recorded price of the same kind"
        if after_the_fact
        else "shorthand for --set cost.device_hour.KIND=PRICE"
    )
    parser.add_argument(
        "--cost-device-hour",
        action="append",
        default=[],
        metavar="KIND=PRICE",
        help=f"price of one device-hour of a device kind ({', '.join(DEVICE_KINDS)}); repeatable; {where}",
    )
    parser.add_argument(
        "--cost-host-hour", type=float, default=None, metavar="PRICE", help="price of one host-hour"
    )
    parser.add_argument(
        "--cost-energy-kwh",
        type=float,
        default=None,
        metavar="PRICE",
        help="price of one kWh of device energy",
    )
    parser.add_argument(
        "--currency", default=None, metavar="LABEL", help=f"currency label (default {DEFAULT_CURRENCY})"
    )


def _device_prices(pairs: list[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for pair in pairs:
        kind, sep, price = pair.partition("=")
        try:
            prices[kind.strip()] = float(price)
        except ValueError:
            sep = ""
        if not sep:
            raise ConfigError(
                f"--cost-device-hour expects KIND=PRICE, got {pair!r} (e.g. --cost-device-hour npu=2.5)"
            )
    return prices


def cost_from_options(options: argparse.Namespace) -> Cost | None:
    """The prices the --cost-* options give (None when they give none)."""
    raw: dict[str, Any] = {"device_hour": _device_prices(options.cost_device_hour)}
    if options.cost_host_hour is not None:
        raw["host_hour"] = options.cost_host_hour
    if options.cost_energy_kwh is not None:
        raw["energy_kwh"] = options.cost_energy_kwh
    if options.currency:
        raw["currency"] = options.currency
    try:
        cost = Cost.model_validate(raw)
    except ValueError as exc:
        raise ConfigError(f"--cost-*: {exc}") from exc
    return cost if cost.priced or options.currency else None


def cost_overrides(options: argparse.Namespace) -> dict[str, str]:
    """The --cost-* options as `--set cost.*` overrides of the scenario (what `embedperf run` records)."""
    cost = cost_from_options(options)
    if cost is None:
        return {}
    out = {f"cost.device_hour.{kind}": str(price) for kind, price in cost.device_hour.items()}
    if cost.host_hour is not None:
        out["cost.host_hour"] = str(cost.host_hour)
    if cost.energy_kwh is not None:
        out["cost.energy_kwh"] = str(cost.energy_kwh)
    if options.currency:
        out["cost.currency"] = json.dumps(cost.currency)
    return out

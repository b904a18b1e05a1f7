"""The `--cost-*` options: prices given to `embedperf run` (recorded as the scenario's cost block) or, after
the fact, to `report`, `capacity` and `compare` (laid over the recorded prices, see scenarios.cost_models)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from embedperf.errors import ConfigError
from scenarios.cost_models import DEFAULT_CURRENCY, DEVICE_KINDS, Cost

# Cost field -> help of its --cost-FIELD option (a single price; device_hour is per kind, below).
SINGLE_PRICES = {"host_hour": "price of one host-hour", "energy_kwh": "price of one kWh of device energy"}


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
    for field, help_text in SINGLE_PRICES.items():
        parser.add_argument(f"--cost-{field.replace('_', '-')}", type=float, metavar="PRICE", help=help_text)
    parser.add_argument("--currency", metavar="LABEL", help=f"currency label (default {DEFAULT_CURRENCY})")


def _device_prices(pairs: list[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for pair in pairs:
        kind, sep, price = pair.partition("=")
        try:
            prices[kind.strip()] = float(price)
        except ValueError:
            sep = ""
        if not sep:
            raise ConfigError(f"--cost-device-hour expects KIND=PRICE, got {pair!r} (e.g. --cost-device-hour npu=2.5)")
    return prices


def cost_from_options(options: argparse.Namespace) -> Cost | None:
    """The prices the --cost-* options give (None when they give none)."""
    raw: dict[str, Any] = {"device_hour": _device_prices(options.cost_device_hour)}
    raw |= {field: price for field in SINGLE_PRICES if (price := getattr(options, f"cost_{field}")) is not None}
    if options.currency:
        raw["currency"] = options.currency
    try:
        cost = Cost.model_validate(raw)
    except ValueError as exc:
        raise ConfigError(f"--cost-*: {exc}") from exc
    return cost if cost.priced or options.currency else None


def cost_overrides(options: argparse.Namespace) -> dict[str, str]:
    """The --cost-* options as `--set cost.*` overrides of the scenario (what `embedperf run` records)."""
    if (cost := cost_from_options(options)) is None:
        return {}
    out = {f"cost.device_hour.{kind}": str(price) for kind, price in cost.device_hour.items()}
    out |= {f"cost.{field}": str(price) for field in SINGLE_PRICES if (price := getattr(cost, field)) is not None}
    if options.currency:
        out["cost.currency"] = json.dumps(cost.currency)
    return out

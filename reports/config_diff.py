"""What differs between the configurations of two runs, for the comparison report's header.

A reviewer comparing two runs asks "what changed?"; the whole service configuration printed
twice hides the one key that did. The service's /info (model, device, precision, its config
and versions, the devices it lists) and the load host are flattened to dotted keys and only the
keys whose values differ are kept, baseline -> candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from embedperf.schema import HostInfo, ServiceInfo
from reports.render import MISSING as ABSENT

# Keys that name one run rather than configure it (the weights' hash differs with the model, which is shown).
IGNORED: frozenset[str] = frozenset({"weights_sha256"})


@dataclass(frozen=True)
class ConfigChange:
    key: str
    baseline: str
    candidate: str


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value) if value else ABSENT
    if value is None or value == "":
        return ABSENT
    return str(value)


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in IGNORED:
                _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
        return
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        value = [",".join(f"{k}={v}" for k, v in item.items() if v not in (None, "")) for item in value]
    out[prefix] = _text(value)


def configuration(info: ServiceInfo | None, host: HostInfo | None) -> dict[str, str]:
    """The run's configuration as dotted keys: the service's /info, then the load host as `host.*`."""
    out: dict[str, str] = {}
    if info is not None:
        _flatten(info.model_dump(mode="json", exclude_none=True), "", out)
    if host is not None:
        _flatten({"host": host.model_dump(mode="json", exclude_none=True)}, "", out)
    return {k: v for k, v in out.items() if k}


def config_difference(
    base_info: ServiceInfo | None, base_host: HostInfo | None, cand_info: ServiceInfo | None,
    cand_host: HostInfo | None,
) -> list[ConfigChange]:  # fmt: skip
    """Keys whose values differ, in the baseline's key order then the candidate's new keys; [] when the same."""
    base = configuration(base_info, base_host)
    cand = configuration(cand_info, cand_host)
    keys = list(base) + [k for k in cand if k not in base]
    return [
        ConfigChange(key, base.get(key, ABSENT), cand.get(key, ABSENT))
        for key in keys
        if base.get(key, ABSENT) != cand.get(key, ABSENT)
    ]

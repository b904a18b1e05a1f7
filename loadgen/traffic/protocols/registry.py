"""The protocols by name, in the order the pre-flight check tries them (openai, which takes any OpenAI model
list, last). Your own: `--protocol package.module:ATTR` (a TargetProtocol instance or class), imported on
first use in every process of the run."""

from __future__ import annotations

import difflib
import importlib

from embedperf.errors import ConfigError
from loadgen.traffic.protocols import kserve_v2, ollama, openai, tei
from loadgen.traffic.protocols.base import Detection, Fetch, TargetProtocol
from scenarios.models import Target, Task

BUILTIN: tuple[TargetProtocol, ...] = (
    kserve_v2.PROTOCOL, tei.PROTOCOL, ollama.PROTOCOL, openai.VLLM, openai.INFINITY, openai.PROTOCOL
)
DEFAULT: TargetProtocol = openai.PROTOCOL  # what a target that shows nothing else is spoken to in


class Registry:
    """Name -> protocol; the built-ins first, in detection order."""

    def __init__(self, protocols: tuple[TargetProtocol, ...] = BUILTIN) -> None:
        self._by_name: dict[str, TargetProtocol] = {}
        for protocol in protocols:
            self.register(protocol)

    def register(self, protocol: TargetProtocol, alias: str = "") -> TargetProtocol:
        """Add a protocol under its name (and an alias: the import path it was named by)."""
        if not isinstance(protocol, TargetProtocol) or not protocol.name:
            raise ConfigError(f"{protocol!r} is not a named TargetProtocol (loadgen.traffic.protocols.base)")
        self._by_name.setdefault(protocol.name, protocol)
        if alias:
            self._by_name[alias] = protocol
        return protocol

    def names(self) -> list[str]:
        """Every protocol's own name (no aliases)."""
        return list(dict.fromkeys(p.name for p in self._by_name.values()))

    def get(self, name: str) -> TargetProtocol:
        """The protocol named `name`, a registered name or `package.module:ATTR`; ConfigError otherwise."""
        if name in self._by_name:
            return self._by_name[name]
        if ":" in name:
            return self.register(_imported(name), alias=name)
        close = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"unknown protocol {name!r}{hint}; known: {', '.join(self.names())}, or package.module:ATTR naming "
            "a TargetProtocol of your own"
        )

    def detect(self, fetch: Fetch) -> Detection | None:
        """The first protocol, in registration order, that the target's answers show."""
        found = (protocol.detect(fetch) for protocol in dict.fromkeys(self._by_name.values()))
        return next((detection for detection in found if detection is not None), None)


def _imported(spec: str) -> TargetProtocol:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"protocol {spec!r}: cannot import {module_name}: {exc}") from None
    found = getattr(module, attr, None)
    if isinstance(found, type) and issubclass(found, TargetProtocol):
        found = found()
    if not isinstance(found, TargetProtocol):
        raise ConfigError(
            f"protocol {spec!r}: {module_name} has no TargetProtocol named {attr!r} "
            "(an instance or subclass of loadgen.traffic.protocols.base.TargetProtocol)"
        )
    return found


REGISTRY = Registry()


def get(name: str) -> TargetProtocol:
    """The protocol a target names; the default (openai) when it names none."""
    return REGISTRY.get(name) if name else DEFAULT


def default_target(target: Target, task: Task) -> Target:
    """The target with an unset protocol, path or model defaulted, without asking it (an unchecked run)."""
    if target.protocol and target.path and target.model:
        return target
    protocol = get(target.protocol)
    model = target.model or protocol.default_model
    path = target.path or protocol.path(task, model, getattr(protocol, "default_prefix", ""))
    return target.model_copy(update={"protocol": target.protocol or protocol.name, "path": path, "model": model})

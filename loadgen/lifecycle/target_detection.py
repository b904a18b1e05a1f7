"""Which protocol, path and model a target speaks, from what the user gave and what the target shows: GETs of
the protocols' info and model-list paths, each within PROBE_TIMEOUT_S and all within DETECT_BUDGET_S."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from embedperf.errors import TargetError
from loadgen.traffic.protocols import registry
from loadgen.traffic.protocols.base import Fetch, Probe, TargetProtocol, parse_json
from scenarios.models import Scenario, Target

PROBE_TIMEOUT_S = 3.0
DETECT_BUDGET_S = 10.0  # all probes together; past it, the rest count as unanswered


@dataclass
class Prober:
    """GETs below one base URL, each path once, within the budget; what `TargetProtocol.detect` reads."""

    base_url: str
    headers: dict[str, str]
    budget_s: float = DETECT_BUDGET_S
    answers: dict[str, Probe] = field(default_factory=dict)
    _deadline_s: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._deadline_s = time.monotonic() + self.budget_s

    def __call__(self, path: str) -> Probe:
        if path not in self.answers:
            self.answers[path] = self._get(path)
        return self.answers[path]

    def _get(self, path: str) -> Probe:
        left_s = self._deadline_s - time.monotonic()
        if left_s <= 0:
            return Probe(0)
        url = self.base_url + path
        request = urllib.request.Request(url, headers={**self.headers, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=min(PROBE_TIMEOUT_S, left_s)) as resp:  # noqa: S310 - user-given target
                return Probe(int(resp.status), parse_json(resp.read())[0])
        except urllib.error.HTTPError as exc:
            return Probe(exc.code, parse_json(exc.read() or b"")[0])
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError):
                raise TargetError(unreachable(self.base_url, exc.reason, PROBE_TIMEOUT_S)) from None
            return Probe(0)
        except (TimeoutError, OSError):
            return Probe(0)


def unreachable(url: str, reason: object, timeout_s: float) -> str:
    """The one-line error for a target that does not answer at all."""
    if isinstance(reason, ConnectionRefusedError):
        why = "connection refused"
    elif isinstance(reason, TimeoutError):
        why = f"no answer within {timeout_s:g} s (target.timeout_s)"
    else:
        why = str(reason)
    return (
        f"cannot reach the target at {url}: {why}; is the service running and listening there? "
        "(start the reference service with `embedperf serve`, or pass --host)"
    )


@dataclass(frozen=True)
class ResolvedTarget:
    """The target as every request of the run speaks to it, and the pre-flight line saying how it was found."""

    target: Target
    protocol: TargetProtocol
    served_models: tuple[str, ...] = ()
    line: str = ""  # '' when the user gave protocol, path and model
    prefix: str = ""  # where the API was found below the base URL
    base_url: str = ""  # set by the pre-flight check: the base URL the load uses

    def apply(self, scenario: Scenario) -> Scenario:
        """The scenario with this target (and the checked base URL, when there is one)."""
        target = self.target.model_copy(update={"base_url": self.base_url}) if self.base_url else self.target
        return scenario.model_copy(update={"target": target})

    def overrides(self) -> dict[str, str]:
        """`--set` values that fix the resolved target for another process (a YAML-quoted string each)."""
        keys = ("protocol", "path", "model")
        return {f"target.{key}": json.dumps(getattr(self.target, key)) for key in keys}


def resolve_target(scenario: Scenario, prober: Fetch) -> ResolvedTarget:
    """Fill target.protocol, path and model: the user's, then what detection shows, then the defaults; nothing
    is probed when all three are given."""
    target, task = scenario.target, scenario.payload.task
    given = registry.get(target.protocol) if target.protocol else None
    if given is not None and target.path and target.model:
        return ResolvedTarget(target, given, prefix=getattr(given, "default_prefix", ""))
    detection = given.detect(prober) if given is not None else registry.REGISTRY.detect(prober)
    protocol = given or (detection.protocol if detection is not None else registry.DEFAULT)
    if given is None:
        how = f"detected from {detection.evidence}" if detection else "no protocol detected: the default"
    else:
        how = f"as given, its API found by {detection.evidence}" if detection is not None else "as given"
    if why_not := protocol.unsupported(task):
        raise TargetError(f"{why_not}; the target speaks {protocol.name} ({how}): set --protocol or payload.task")
    prefix = detection.prefix if detection is not None else getattr(protocol, "default_prefix", "")
    served = detection.models if detection is not None else ()
    if not target.model and not served:
        served = tuple(protocol.served_models(prober, prefix))
    model = target.model or (served[0] if served else protocol.default_model)
    if not model and not target.path and protocol.model_in_path:
        raise TargetError(
            f"{protocol.name} needs a model: its requests go to {protocol.path(task, '{model}', prefix)} and "
            "the target lists none; pass --model NAME (or --set target.model=NAME)"
        )
    path = target.path or protocol.path(task, model, prefix)
    name = target.protocol or protocol.name  # an import path stays one: other processes import it by it
    resolved = target.model_copy(update={"protocol": name, "path": path, "model": model})
    model_text = f'model "{model}"' if model else "no model"
    line = f"target: {name} ({protocol.label}) at {path}, {model_text} ({how}; --protocol/--model to set)"
    return ResolvedTarget(resolved, protocol, served, line, prefix)

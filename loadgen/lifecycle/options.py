"""Options that `locust -f locustfiles/...` and `embedperf run` share, and how the web UI shows them.

Both commands take the same spelling for the same thing (--step-duration-s, --warmup-s, --api-key, --protocol,
--model); each is defined here once so their help texts and meaning cannot drift apart."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import MutableMapping

from embedperf.errors import ConfigError
from scenarios.loader import load_scenario, shipped_scenarios

API_KEY_HELP = (
    "API key sent as a Bearer token (default: the environment variable named by target.api_key_env, "
    "EMBEDPERF_TARGET_API_KEY)"
)
# --set KEY=VALUE spelled out for the commonest overrides; an explicit --set of the same key wins.
STEP_SHORTHANDS: dict[str, str] = {"step_duration_s": "steps.duration_s", "warmup_s": "steps.warmup_s"}
TARGET_SHORTHANDS: dict[str, str] = {"protocol": "target.protocol", "model": "target.model"}  # strings
PROTOCOL_HELP = (
    "target protocol: openai, tei, kserve-v2, ollama, infinity, vllm, or package.module:ATTR naming your own "
    "(default: target.protocol, else detected by the pre-flight check; shorthand for --set target.protocol=P)"
)
UNTIL_HELP = (
    "adaptive steps: hold each step until the 95%% interval of its P99 is at most this wide relative to the P99, "
    "then go on (its duration is then its longest time): p99_rel_width=0.1[,min_requests=1000][,min_s=5] "
    "(shorthand for --set steps.until.KEY=VALUE; see steps.until in scenarios/until_models.py)"
)
MODEL_HELP = (
    "model id sent with each request (default: target.model, else the model the target serves; shorthand "
    "for --set target.model=ID)"
)


def add_step_options(parser: argparse._ActionsContainer) -> None:
    """--step-duration-s, --warmup-s, --until: every step's length, trimmed warm-up and adaptive end."""
    parser.add_argument(
        "--step-duration-s", type=float, default=None, metavar="S",
        help="every step's duration in seconds (shorthand for --set steps.duration_s=S)",
    )
    parser.add_argument(
        "--warmup-s", type=float, default=None, metavar="S",
        help="seconds at the start of every step the analysis trims; shorter than the step "
        "(shorthand for --set steps.warmup_s=S)",
    )
    parser.add_argument("--until", default=None, metavar="p99_rel_width=W[,KEY=VALUE...]", help=UNTIL_HELP)


def until_overrides(spec: str | None) -> dict[str, str]:
    """`--until p99_rel_width=0.1,min_s=5` as `--set steps.until.*` overrides (every step)."""
    if not spec:
        return {}
    out = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"--until expects KEY=VALUE[,KEY=VALUE...], got {spec!r} (e.g. --until p99_rel_width=0.1)")
        out[f"steps.until.{key.strip()}"] = value.strip()
    return out


def add_api_key_option(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--api-key", default=None, metavar="KEY", help=API_KEY_HELP)


def add_target_options(parser: argparse._ActionsContainer) -> None:
    """--protocol and --model: how to speak to the target, when the pre-flight check should not detect it."""
    parser.add_argument("--protocol", default=None, metavar="NAME|MODULE:ATTR", help=PROTOCOL_HELP)
    parser.add_argument("--model", default=None, metavar="ID", help=MODEL_HELP)


def shorthand_overrides(overrides: dict[str, str], options: object) -> dict[str, str]:
    """The shorthands options carry, then the --set overrides, which win (`--set steps.1.warmup_s=2` over
    `--warmup-s`). Target strings are quoted so that a model id such as `1.5` stays text in YAML."""
    shorthands: dict[str, str] = {}
    for attr, key in (STEP_SHORTHANDS | TARGET_SHORTHANDS).items():
        value = getattr(options, attr, None)
        if value not in (None, ""):
            shorthands[key] = json.dumps(str(value)) if attr in TARGET_SHORTHANDS else str(value)
    shorthands |= until_overrides(getattr(options, "until", None))
    return {**shorthands, **overrides}


def export_api_key(api_key: str | None, env_name: str, environ: MutableMapping[str, str] | None = None) -> None:
    """Put --api-key in the variable target.api_key_env names, for this process and its children."""
    if api_key:
        (os.environ if environ is None else environ)[env_name] = api_key


class Suggestions(list[str]):
    """Choices the web UI offers; on the command line the scenario loader validates any value."""

    def __contains__(self, value: object) -> bool:
        return True


def scenario_choices(default_scenario: str) -> Suggestions:
    """Shipped scenarios this locustfile can run (closed-loop files cannot run open-loop scenarios)."""
    open_loop = load_scenario(default_scenario).is_open_loop
    names = [n for n in shipped_scenarios() if load_scenario(n).is_open_loop == open_loop]
    return Suggestions(names if default_scenario in names else [default_scenario, *names])


def rejoin_overrides(items: list[str]) -> list[str]:
    """--set values; the web UI splits its text field at commas, so pieces without `=` are rejoined."""
    out: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if "=" not in item.split("[", 1)[0] and out:
            out[-1] += "," + item
        else:
            out.append(item)
    return out

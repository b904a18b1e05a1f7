"""Find, override and validate scenarios: the one place a YAML file becomes a `Scenario`.

Override keys are dotted paths into the scenario (`steps.duration_s`, `steps.1.users`,
`target.base_url`); a key naming a list field without an index applies to every element.
Precedence, lowest first: the YAML file, its profile, `EMBEDPERF_SCENARIO__...` environment
variables (`__` separates levels: `EMBEDPERF_SCENARIO__STEPS__DURATION_S=5`), then `--set k=v`.
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from embedperf.errors import ConfigError
from scenarios.datasets import load_dataset
from scenarios.models import CHECK_FILES, WARMUP_TOO_LONG, Scenario, did_you_mean

SCENARIOS_DIR = Path(__file__).resolve().parent
CORPORA_DIR = SCENARIOS_DIR / "corpora"
ENV_PREFIX = "EMBEDPERF_SCENARIO__"
PROFILES: tuple[str, ...] = ("quick", "full")

OVERRIDE_HELP = (
    "Override any scenario field with --set KEY=VALUE (repeatable). KEY is a dotted path: "
    "steps.duration_s=5 (every step), steps.0.users=2, target.base_url=http://h:8086, "
    "payload.validation_mix=0.05, open_loop.arrival=poisson. VALUE is parsed as YAML. "
    "The environment does the same: EMBEDPERF_SCENARIO__STEPS__DURATION_S=5. "
    "Precedence: file < profile < environment < --set."
)


MATRIX_FILES = frozenset({"optimizations", "accelerator"})  # `embedperf matrix` studies, not scenarios


def shipped_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIOS_DIR.glob("*.yaml") if p.stem not in MATRIX_FILES)


def scenario_path(name_or_path: str) -> Path:
    """A shipped scenario's name or a path to a YAML file -> the file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not candidate.is_file():
            raise ConfigError(f"scenario file {candidate} does not exist")
        return candidate
    shipped = SCENARIOS_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    names = shipped_scenarios()
    raise ConfigError(
        f"unknown scenario {name_or_path!r}{did_you_mean(name_or_path, names)}; "
        f"shipped scenarios: {', '.join(names)} (or pass a path to a YAML file)"
    )


def add_override_option(parser: argparse._ActionsContainer, help_text: str = "override a field") -> None:
    """`--set KEY=VALUE` (repeatable) for every command that runs a scenario; read with parse_overrides."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text)


def parse_overrides(pairs: list[str] | None) -> dict[str, str]:
    """`["a.b=1", ...]` -> `{"a.b": "1"}`; a pair without `=` is an error."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {pair!r} (e.g. --set steps.duration_s=5)")
        out[key.strip()] = value
    return out


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`EMBEDPERF_SCENARIO__STEPS__DURATION_S=5` -> `{"steps.duration_s": "5"}`."""
    env = os.environ if environ is None else environ
    return {
        key[len(ENV_PREFIX) :].lower().replace("__", "."): value
        for key, value in env.items()
        if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX)
    }


def load_scenario(
    name_or_path: str,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Scenario:
    """Read, override and validate a scenario; errors name the file, the field and the valid choices."""
    path = scenario_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of scenario fields at the top level")
    raw.setdefault("name", path.stem)
    if profile:
        profiles = raw.get("profiles") or {}
        if profile not in profiles:
            raise ConfigError(
                f"{path}: no profile {profile!r}{did_you_mean(profile, list(profiles))}; "
                f"profiles in this file: {', '.join(profiles) or '(none)'}"
            )
        raw = apply_overrides(raw, profiles[profile] or {}, path, origin=f"profile {profile!r}")
        raw["profile"] = profile
    from_env = env_overrides(environ)
    raw = apply_overrides(raw, from_env, path, origin="environment")
    raw = apply_overrides(raw, dict(overrides or {}), path, origin="--set")
    given = {
        **{k: f"{ENV_PREFIX}{k.upper().replace('.', '__')}={v}" for k, v in from_env.items()},
        **{k: f"--set {k}={v}" for k, v in (overrides or {}).items()},
    }
    try:
        scenario = Scenario.model_validate(raw, context={CHECK_FILES: True})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(path, exc, given)) from None
    dataset = scenario.payload.dataset
    if dataset is not None:  # fail before any load: missing file, missing field, empty dataset
        dataset.path = str(_dataset_path(dataset.path, path))
        load_dataset(dataset)
    if (probes := scenario.payload.quality_probes) is not None:
        probes.reference = str(_dataset_path(probes.reference, path))
        if not Path(probes.reference).is_file():
            raise ConfigError(
                f"{path}: payload.quality_probes.reference {probes.reference} does not exist; write one with "
                "`embedperf precision --write-reference PATH`"
            )
    return scenario


def _dataset_path(given: str, scenario_file: Path) -> Path:
    """A relative dataset path names a file beside the scenario file, else one under the working directory."""
    candidate = Path(given).expanduser()
    if candidate.is_absolute():
        return candidate
    beside = scenario_file.parent / candidate
    return beside.resolve() if beside.is_file() else candidate.resolve()


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any], path: Path, origin: str) -> dict[str, Any]:
    """A copy of raw with each dotted key set; string values are parsed as YAML scalars/lists."""
    out = copy.deepcopy(raw)
    for key, value in overrides.items():
        if isinstance(value, str):  # YAML reads an empty value as null: it stays an empty string
            value = yaml.safe_load(value) if value.strip() else ""
        _set_path(out, key.split("."), value, key, path, origin)
    return out


def _set_path(node: Any, keys: list[str], value: Any, full_key: str, path: Path, origin: str) -> None:
    key, rest = keys[0], keys[1:]
    if isinstance(node, list):
        if key.isdigit():
            index = int(key)
            if index >= len(node):
                raise ConfigError(
                    f"{path}: {origin} key {full_key!r}: index {index} out of range (the list has {len(node)} items)"
                )
            targets = [index]
        else:  # broadcast over every element
            targets = list(range(len(node)))
            rest = keys
        for i in targets:
            if rest:
                _set_path(node[i], rest, value, full_key, path, origin)
            else:
                node[i] = copy.deepcopy(value)
        return
    if not isinstance(node, dict):
        raise ConfigError(f"{path}: {origin} key {full_key!r}: {key!r} is inside a value, not a section")
    if not rest:
        node[key] = value
        return
    if node.get(key) is None:
        node[key] = {}
    _set_path(node[key], rest, value, full_key, path, origin)


def _blamed(path: Path, exc: ValidationError, given: Mapping[str, str]) -> str:
    """Who set the invalid values: the overrides (--set, environment) whose keys every error lies under,
    else the scenario file."""
    culprits: list[str] = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"] if not isinstance(p, int))
        hits = [
            text for key, text in given.items()
            if (parts := tuple(key.split("."))) and (loc[: len(parts)] == parts or parts[: len(loc)] == loc)
        ]  # fmt: skip
        if not hits or not loc:
            return str(path)
        culprits += [h for h in hits if h not in culprits]
    return ", ".join(culprits) or str(path)


def format_validation_error(path: Path, exc: ValidationError, given: Mapping[str, str] | None = None) -> str:
    """One readable line per problem, each naming the field and what is valid, under what set the values:
    the file, or the --set/environment overrides (given: dotted key -> how it was given) when every
    problem lies under one of them; a single problem is a single line."""
    source = _blamed(path, exc, given or {})
    lines: list[str] = []
    warmups = [err for err in exc.errors() if err["type"] == WARMUP_TOO_LONG]
    for err in exc.errors():
        if err["type"] == WARMUP_TOO_LONG:
            continue
        loc = [str(p) for p in err["loc"]]
        dotted = ".".join(loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            valid = _valid_fields(Scenario, err["loc"][:-1])
            hint = did_you_mean(loc[-1], valid)
            lines.append(f"  unknown field {dotted!r}{hint}; valid fields here: {', '.join(valid)}")
        elif err["type"] == "literal_error":
            expected = (err.get("ctx") or {}).get("expected", "")
            choices = [c.strip().strip("'") for c in str(expected).replace(" or ", ",").split(",") if c.strip()]
            hint = did_you_mean(str(err.get("input")), choices)
            lines.append(f"  {dotted}: {err.get('input')!r} is not valid{hint}; valid choices: {', '.join(choices)}")
        else:
            lines.append(f"  {dotted}: {err['msg']}")
    if warmups:
        lines.append("  " + _warmup_line(warmups))
    what = "invalid scenario" if source == str(path) else "invalid value"
    if len(lines) == 1:
        return f"{source}: {what}: {lines[0].strip()}"
    return "\n".join([f"{source}: {what}", *lines])


def _warmup_line(errors: list[Any]) -> str:
    """Every step whose warm-up is not shorter than the step, in one line with the flags that fix it."""
    where = [".".join(str(p) for p in err["loc"]) or "steps" for err in errors]
    values = {(err["ctx"]["warmup_s"], err["ctx"]["duration_s"]) for err in errors}
    if len(values) == 1:
        warmup_s, duration_s = values.pop()
        what = f"steps.warmup_s ({warmup_s} s) must be shorter than steps.duration_s ({duration_s} s)"
        at = f" ({', '.join(where)})"
    else:
        what = "steps.warmup_s must be shorter than steps.duration_s"
        at = ": " + ", ".join(
            f"{w} warm-up {e['ctx']['warmup_s']} s of {e['ctx']['duration_s']} s"
            for w, e in zip(where, errors, strict=True)
        )
    return (
        f"{what}{at}; shorten the warm-up (--warmup-s S or --set steps.warmup_s=S) or lengthen the steps "
        "(--step-duration-s S or --set steps.duration_s=S)"
    )


def _valid_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model found by walking loc through nested models and lists."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is not None and not isinstance(part, int):
            field = current.model_fields.get(str(part))
            current = None if field is None else _model_in(field.annotation)
    return [] if current is None else sorted(current.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = (_model_in(arg) for arg in getattr(annotation, "__args__", ()) or ())
    return next((model for model in found if model is not None), None)

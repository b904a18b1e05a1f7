"""`embedperf serve` / `python -m service`: flags mirror ServiceSettings fields and override EMBEDPERF_* env."""

from __future__ import annotations

import argparse
import logging
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from embedperf.errors import ConfigError, EmbedperfError
from service.settings import ServiceSettings


def _field_type(annotation: Any) -> tuple[Any, tuple[Any, ...] | None]:
    """(argparse type, choices) for a settings annotation such as int | None or Literal[...]."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _field_type(args[0])
    if origin is typing.Literal:
        return str, tuple(typing.get_args(annotation))
    return (annotation if annotation in (int, float, str) else str), None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf serve",
        description="Reference OpenAI-compatible embedding service with dynamic batching. "
        "Every flag can also be set as EMBEDPERF_<FLAG> (upper case, '-' -> '_'); flags win.",
    )
    for name, info in ServiceSettings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = info.default
        help_text = f"{info.description} (default: {default if default not in (None, '') else 'unset'})"
        if name == "api_keys":
            help_text = f"{info.description} (prefer the EMBEDPERF_API_KEYS env variable)"
        if info.annotation is bool:
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text
            )
            continue
        arg_type, choices = _field_type(info.annotation)
        metavar = "PATH" if name == "model" else None
        parser.add_argument(
            flag, type=arg_type, choices=choices, default=argparse.SUPPRESS, help=help_text, metavar=metavar
        )
    return parser


def settings_from_args(argv: list[str]) -> ServiceSettings:
    args = build_parser().parse_args(argv)
    try:
        return ServiceSettings(**vars(args))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid service settings: {problems}") from None


def serve(settings: ServiceSettings) -> int:
    import uvicorn

    from service.app import create_app
    from service.model import load_model

    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )

    # Load before listening so a missing device runtime or model exits at once with its message;
    # /ready stays 503 until the warm-up batch has run.
    model = load_model(
        Path(settings.model) if settings.model else None,
        settings.device,
        settings.precision,
        settings.threads,
        int8_exclude=settings.int8_exclude,
    )
    app = create_app(settings, model)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        lifespan="on",
        access_log=False,
    )
    uvicorn.Server(config).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return serve(settings_from_args(list(sys.argv[1:] if argv is None else argv)))
    except EmbedperfError as exc:
        print(f"embedperf serve: error: {exc}", file=sys.stderr)
        return exc.exit_code
